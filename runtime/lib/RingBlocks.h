//===- RingBlocks.h - what ring attention's kernels share -------*- C++ -*-===//
//
// The parts of ring attention that do not depend on how a block's scores
// are computed: which rectangles of a key/value block a rank's queries
// attend to (planBlocks), the layout passed through autograd as integers,
// and the ring itself (one exchange per step, overlapped with the block's
// compute). RingAttention.cpp computes blocks with explicit fp32 scores,
// RingFused.cpp with LibTorch's fused (flash) kernel.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_RINGBLOCKS_H
#define RLHF_RUNTIME_RINGBLOCKS_H

#include "RingAttention.h"

#include <ATen/ATen.h>

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

namespace rlhf::parallel::ring {

/// What a rank's queries compute with one key/value block: local query
/// positions [row, row + rows) against the block's keys [col, col + cols),
/// under the causal mask of their positions when `masked`. `diagonal`:
/// masked, and the queries and keys are the same positions, so the mask is
/// a plain causal (lower-triangular) one.
struct Block {
  int64_t row = 0, rows = 0, col = 0, cols = 0;
  bool masked = false, diagonal = false;
};

/// The rectangles of a block (keys at positions `ks`) that queries at `qs`
/// compute: every pair of spans the causal mask does not hide entirely,
/// masked where it straddles the diagonal. Pairs that line up merge into
/// one rectangle; with `keepDiagonals`, masked pairs stay apart (a fused
/// kernel takes only the plain causal mask of a diagonal pair).
std::vector<Block> planBlocks(const std::vector<Span> &qs,
                              const std::vector<Span> &ks, bool keepDiagonals);

/// Whether every masked rectangle rank `i` computes (against every rank's
/// block) is a diagonal pair, as in every layout whose spans partition the
/// sequence (disjoint spans are wholly before or after each other).
bool masksAreCausal(const RingLayout &layout, int i);

/// The layout as one integer list (autograd keeps it for backward): per
/// rank its span count, then first and size of each span.
std::vector<int64_t> flatten(const RingLayout &layout);
RingLayout unflatten(const std::vector<int64_t> &flat);

/// Scores computed so far, forward and backward (ringWork()).
std::atomic<int64_t> &workCounter(bool backward);

/// `t` on its way to the next ring rank while the previous rank's comes in:
/// one exchange (both posted at once), so the ring cannot deadlock. The
/// caller computes with the block it holds meanwhile (USP overlaps the ring
/// with attention; the cost model prices max(0, comm - compute)), then
/// takes the next one with arrived().
class Shift {
public:
  Shift(Communicator *ring, const at::Tensor &t);
  at::Tensor arrived();

private:
  std::vector<Communicator::Peer> sends, recvs;
  std::unique_ptr<Communicator::Pending> pending;
};

inline at::Tensor shift(Communicator *ring, const at::Tensor &t) {
  return Shift(ring, t).arrived();
}

/// Visits the blocks in ring order: at step s rank i holds block j =
/// (i - s) mod R, `kv`'s as it arrived, and runs `visit(j, kv, b)` for
/// every rectangle b of it (a hidden block still moves on). The next
/// block's exchange is posted first, so it moves while this one is
/// computed, and taken after; `moved()` runs after each shift (backward
/// moves the block's gradients there, one exchange at a time).
template <typename Visit, typename Moved>
void circulate(Communicator *comm, const RingLayout &layout, bool keepDiagonals,
               at::Tensor kv, const Visit &visit, const Moved &moved) {
  const int i = comm->rank(), R = comm->size();
  for (int s = 0; s < R; ++s) {
    const int j = (i - s + R) % R;
    std::optional<Shift> next;
    if (s + 1 < R)
      next.emplace(comm, kv);
    for (const Block &b :
         planBlocks(layout[size_t(i)], layout[size_t(j)], keepDiagonals))
      visit(j, kv, b);
    if (next) {
      kv = next->arrived();
      moved();
    }
  }
}

/// Backward's ring: the blocks of `kv` [2, B, Hkv, n, D] circulate as in
/// forward, each followed by its key and value gradients, fp32 so that the
/// partial sums are not rounded at every hop; `visit(j, kv, dkv, b)` adds
/// rectangle b's share to the held block's `dkv`. A block's gradients move
/// after it (they are still being summed), and after R - 1 shifts this rank
/// holds block i + 1's: one more brings every block's finished gradients
/// home. Returns this rank's [dK; dV] in fp32.
template <typename Visit>
at::Tensor circulateGradients(Communicator *comm, const RingLayout &layout,
                              bool keepDiagonals, const at::Tensor &kv,
                              const Visit &visit) {
  at::Tensor dkv = at::zeros(kv.sizes(), kv.options().dtype(at::kFloat));
  circulate(
      comm, layout, keepDiagonals, kv,
      [&](int j, const at::Tensor &held, const Block &b) {
        visit(j, held, dkv, b);
      },
      [&] { dkv = shift(comm, dkv); });
  if (comm->size() > 1)
    dkv = shift(comm, dkv);
  return dkv;
}

/// The block's keys (or values, or their gradients) of `t` [..., n, D].
inline at::Tensor colsOf(const at::Tensor &t, const Block &b) {
  return t.narrow(-2, b.col, b.cols);
}

/// Folds a block's attention (output `blockOut` and log-sum-exp `blockLse`
/// of its rows) into the running output `o` and log-sum-exp `l` of the same
/// rows (fp32), as an online softmax does. A row with no key in the block
/// has blockLse -inf and keeps its values.
void merge(at::Tensor o, at::Tensor l, const at::Tensor &blockOut,
           const at::Tensor &blockLse);

} // namespace rlhf::parallel::ring

#endif // RLHF_RUNTIME_RINGBLOCKS_H
