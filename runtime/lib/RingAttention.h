//===- RingAttention.h - causal attention over a ring of ranks --*- C++ -*-===//
//
// The ring half of unified sequence parallelism (USP, arXiv 2405.07719):
// each ring rank holds the queries, keys and values of some positions of
// every sequence (the model uses the zigzag layout below); the key/value
// blocks travel once around the ring and each rank folds its queries'
// attention over every block into an online softmax (running output and
// log-sum-exp). Backward circulates the blocks again, recomputes each
// block's probabilities from the saved log-sum-exp and carries the blocks'
// key/value gradients along to their owners.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_RINGATTENTION_H
#define RLHF_RUNTIME_RINGATTENTION_H

#include "rlhf/runtime/Communicator.h"

#include <ATen/core/Tensor.h>

#include <vector>

namespace rlhf::parallel {

/// Consecutive positions [first, first + size) of a sequence.
struct Span {
  int64_t first = 0, size = 0;
};

/// Which positions each ring rank holds: per ring rank, its spans in the
/// order its tensors hold them (every rank the same number of positions).
using RingLayout = std::vector<std::vector<Span>>;

/// The balanced layout of a sequence of S positions over `ring` ranks: S
/// in 2 ring equal chunks, rank r holding chunks r and 2 ring - 1 - r (in
/// that order), so under the causal mask every rank attends to the same
/// number of keys (Megatron's context parallelism). S must be a multiple of
/// 2 ring; with ring = 1 the whole sequence is one span.
RingLayout zigzagLayout(int64_t S, int ring);

/// How ring attention computes each block.
enum class RingKernel {
  /// Fused where fusedRingApplies, else Explicit.
  Auto,
  /// LibTorch's fused attention kernel per block (flash: FlashAttention-2
  /// on CUDA, its blocked CPU kernel), which returns the block's
  /// log-sum-exp; no score matrix is held. An error where it does not apply.
  Fused,
  /// Each block's scores as an fp32 matrix (matmul, mask, exp): any mask,
  /// dtype and device.
  Explicit,
};

/// Causal scaled dot-product attention of this ring rank's queries
/// q [B, H, n, D] over the keys and values k, v [B, Hkv, n, D] of every
/// ring rank, at the positions `layout` gives (layout[ring->rank()] for q,
/// k and v here). A block pair that the causal mask hides entirely is
/// skipped, one it shows entirely runs unmasked, the rest under the mask
/// of their positions. H must be a multiple of Hkv (GQA: query head h reads
/// KV head h / (H / Hkv), as repeat_interleave pairs them). Returns
/// [B, H, n, D] in q's dtype; the blocks' outputs are merged, and key and
/// value gradients carried around the ring, in fp32. An autograd function:
/// backward runs the ring backward, so every rank gets the gradients of its
/// own q, k and v.
at::Tensor ringAttention(const at::Tensor &q, const at::Tensor &k,
                         const at::Tensor &v, Communicator *ring,
                         const RingLayout &layout,
                         RingKernel kernel = RingKernel::Auto);

/// Whether RingKernel::Fused applies on ring rank `rank`: LibTorch would
/// run its flash kernel for q, k and v (dtype, device, head size; CUDA
/// needs bf16 or fp16), and every masked block of the layout pairs the
/// same positions of queries and keys, so its mask is plain causal (true
/// of every layout whose spans partition the sequence: two disjoint spans
/// never straddle each other's diagonal).
bool fusedRingApplies(const at::Tensor &q, const at::Tensor &k,
                      const at::Tensor &v, const RingLayout &layout, int rank);

/// How many times RingKernel::Fused repeats each of k's KV heads for q's
/// query heads: 1 where LibTorch would hand its flash kernel the grouped
/// heads itself (SDPA's enable_gqa), else heads / kv heads.
int64_t fusedRingKvRepeat(const at::Tensor &q, const at::Tensor &k);

namespace detail {
/// RingKernel::Fused, where fusedRingApplies (RingFused.cpp).
at::Tensor ringAttentionFused(const at::Tensor &q, const at::Tensor &k,
                              const at::Tensor &v, Communicator *ring,
                              const RingLayout &layout);
} // namespace detail

/// Attention scores (query x key pairs, summed over batch rows and query
/// heads) that ringAttention computed in this process so far, forward and
/// backward: equal on every ring rank when the layout is balanced. A fused
/// kernel's causal block counts the pairs its mask shows, an explicit one
/// the whole rectangle.
struct RingWork {
  int64_t forward = 0, backward = 0;
};
RingWork ringWork();

} // namespace rlhf::parallel

#endif // RLHF_RUNTIME_RINGATTENTION_H
