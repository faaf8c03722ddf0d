//===- RingAttention.cpp - causal attention over a ring of ranks ----------===//
//
// Chunks are contiguous: ring rank i holds positions [i n, (i + 1) n), so
// under the causal mask it attends to blocks 0..i and rank R-1 computes R
// blocks while rank 0 computes one; every step waits for the slowest rank,
// so the ring runs at rank R-1's pace (zigzag chunks would balance it). We
// keep contiguous chunks because they are the Ulysses layout too: position
// chunk r of the whole sp group stays on sp rank r, so RoPE, the gathered
// logits and the losses need no permutation.
//
//===----------------------------------------------------------------------===//

#include "RingAttention.h"

#include "rlhf/runtime/Error.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <optional>

using namespace rlhf;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

namespace {

/// `t` on its way to the next ring rank while the previous rank's comes in:
/// one exchange (both posted at once), so the ring cannot deadlock. The
/// caller computes with the block it holds meanwhile (USP overlaps the ring
/// with attention; the cost model prices max(0, comm - compute)), then
/// takes the next one with arrived().
class Shift {
public:
  Shift(Communicator *ring, const at::Tensor &t) {
    const int r = ring->rank(), n = ring->size();
    sends = {{t.contiguous(), (r + 1) % n}};
    recvs = {{at::empty_like(sends[0].tensor), (r + n - 1) % n}};
    pending = ring->startExchange(sends, recvs);
  }
  at::Tensor arrived() {
    pending->wait();
    return recvs[0].tensor;
  }

private:
  std::vector<Communicator::Peer> sends, recvs;
  std::unique_ptr<Communicator::Pending> pending;
};

at::Tensor shift(Communicator *ring, const at::Tensor &t) {
  return Shift(ring, t).arrived();
}

/// The shapes of one rank's attention. Queries are handled grouped by KV
/// head, [B, Hkv, g n, D] (row gi n + p is query head kv g + gi at position
/// p), so GQA needs no repeated keys: a block's key gradient sums over the
/// group by the matmul itself.
struct Dims {
  int64_t B, H, n, D, Hkv, g;
  explicit Dims(const at::Tensor &q, const at::Tensor &k)
      : B(q.size(0)), H(q.size(1)), n(q.size(2)), D(q.size(3)), Hkv(k.size(1)),
        g(q.size(1) / k.size(1)) {}
  at::Tensor grouped(const at::Tensor &t) const {
    return t.to(at::kFloat).reshape({B, Hkv, g * n, D});
  }
};

/// Scores of the (pre-scaled) grouped queries against one key block
/// [B, Hkv, n, D]; the diagonal block masks the keys after each query.
at::Tensor blockScores(const Dims &d, const at::Tensor &qg, const at::Tensor &k,
                       bool diagonal) {
  at::Tensor s = at::matmul(qg, k.to(at::kFloat).transpose(-1, -2));
  if (diagonal) {
    at::Tensor after = at::ones({d.n, d.n}, qg.options().dtype(at::kBool))
                           .triu(1)
                           .repeat({d.g, 1}); // [g n, n]
    s.masked_fill_(after, -std::numeric_limits<float>::infinity());
  }
  return s;
}

// Autograd functions take the communicator as an integer handle.
struct RingAttention : torch::autograd::Function<RingAttention> {
  static at::Tensor forward(AutogradContext *ctx, at::Tensor q, at::Tensor k,
                            at::Tensor v, int64_t c) {
    auto *ring = reinterpret_cast<Communicator *>(c);
    const Dims d(q, k);
    const int i = ring->rank(), R = ring->size();
    at::Tensor qg = d.grouped(q) / std::sqrt(double(d.D));
    // Keys and values travel together, in the compute dtype.
    at::Tensor kv = at::stack({k, v}).contiguous();
    at::Tensor out, lse; // [B, Hkv, g n, D] and [B, Hkv, g n]
    for (int s = 0; s < R; ++s) {
      const int j = (i - s + R) % R; // the rank whose block this is
      std::optional<Shift> next;
      if (s + 1 < R)
        next.emplace(ring, kv);
      // Blocks after this rank's chunk are all masked: no compute, but the
      // block still moves on. Step 0 is the diagonal, so every query row
      // has a finite log-sum-exp from the start.
      if (j <= i) {
        at::Tensor sc = blockScores(d, qg, kv[0], j == i);
        at::Tensor blockLse = sc.logsumexp(-1);
        at::Tensor blockOut = at::matmul((sc - blockLse.unsqueeze(-1)).exp(),
                                         kv[1].to(at::kFloat));
        if (!out.defined()) {
          out = blockOut;
          lse = blockLse;
        } else {
          at::Tensor merged = at::logaddexp(lse, blockLse);
          out = out * (lse - merged).exp().unsqueeze(-1) +
                blockOut * (blockLse - merged).exp().unsqueeze(-1);
          lse = merged;
        }
      }
      if (next)
        kv = next->arrived();
    }
    at::Tensor result =
        out.reshape({d.B, d.H, d.n, d.D}).to(q.scalar_type()).contiguous();
    ctx->saved_data["comm"] = c;
    ctx->save_for_backward({q, k, v, result, lse});
    return result;
  }

  static tensor_list backward(AutogradContext *ctx, tensor_list grads) {
    auto *ring =
        reinterpret_cast<Communicator *>(ctx->saved_data["comm"].toInt());
    const tensor_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2],
                     &lse = saved[4];
    const Dims d(q, k);
    const int i = ring->rank(), R = ring->size();
    const double scale = 1.0 / std::sqrt(double(d.D));
    at::Tensor qg = d.grouped(q) * scale;
    at::Tensor dOut = d.grouped(grads[0]);
    // The softmax backward's row term, sum_k P dP = dOut . out.
    at::Tensor delta = (dOut * d.grouped(saved[3])).sum(-1, /*keepdim=*/true);
    at::Tensor dq = at::zeros_like(qg);
    at::Tensor kv = at::stack({k, v}).contiguous();
    // The held block's key and value gradients travel with it (in fp32, so
    // the partial sums are not rounded at every hop).
    at::Tensor dkv = at::zeros(kv.sizes(), qg.options());
    for (int s = 0; s < R; ++s) {
      const int j = (i - s + R) % R;
      // The next block moves while this one's gradients are computed; its
      // gradients move after (they are still being summed), one exchange
      // at a time.
      std::optional<Shift> next;
      if (s + 1 < R)
        next.emplace(ring, kv);
      if (j <= i) {
        at::Tensor p =
            (blockScores(d, qg, kv[0], j == i) - lse.unsqueeze(-1)).exp();
        at::Tensor vf = kv[1].to(at::kFloat);
        dkv[1] += at::matmul(p.transpose(-1, -2), dOut);
        at::Tensor ds = p * (at::matmul(dOut, vf.transpose(-1, -2)) - delta);
        dq += at::matmul(ds, kv[0].to(at::kFloat));
        dkv[0] += at::matmul(ds.transpose(-1, -2), qg);
      }
      if (next) {
        kv = next->arrived();
        dkv = shift(ring, dkv);
      }
    }
    // After R - 1 shifts this rank holds block i + 1; one more brings every
    // block's finished gradients home.
    if (R > 1)
      dkv = shift(ring, dkv);
    return {(dq * scale).reshape({d.B, d.H, d.n, d.D}).to(q.scalar_type()),
            dkv[0].to(k.scalar_type()), dkv[1].to(v.scalar_type()),
            at::Tensor()};
  }
};

} // namespace

at::Tensor parallel::ringAttention(const at::Tensor &q, const at::Tensor &k,
                                   const at::Tensor &v, Communicator *ring) {
  if (q.dim() != 4 || k.dim() != 4 || k.sizes() != v.sizes() ||
      k.size(1) == 0 || q.size(1) % k.size(1) || q.size(2) != k.size(2))
    throw Error("ring attention needs q [B, H, n, D] and k, v [B, Hkv, n, D] "
                "with H a multiple of Hkv; got q " +
                c10::str(q.sizes()) + ", k " + c10::str(k.sizes()));
  return RingAttention::apply(q, k, v, reinterpret_cast<int64_t>(ring));
}
