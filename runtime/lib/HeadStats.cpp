//===- HeadStats.cpp - token log-probs without [N, vocab] logits ----------===//

#include "HeadStats.h"

#include "rlhf/runtime/Communicator.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

using namespace rlhf;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

int64_t rlhf::logitRowsPerChunk(int64_t vocab, int64_t chunkBytes) {
  if (chunkBytes <= 0)
    chunkBytes = logitChunkBytes(vocab);
  return std::max<int64_t>(1, chunkBytes / (4 * std::max<int64_t>(1, vocab)));
}

namespace {

/// One chunk's logits in fp32: the GEMM in the weights' dtype, as
/// at::linear would run it for the whole batch, times `scale` (a sampling
/// temperature's inverse) in fp32, as sampling divides them.
at::Tensor chunkLogits(const at::Tensor &x, const at::Tensor &w, double scale) {
  at::Tensor z = at::linear(x, w).to(at::kFloat);
  return scale == 1.0 ? z : z.mul_(scale);
}

/// The vocabulary shard's ids [offset, offset + V/k) of `next`: a mask of
/// those this rank owns and their column in the shard (0 for the others).
std::pair<at::Tensor, at::Tensor> ownedIds(const at::Tensor &next,
                                           int64_t offset, int64_t width) {
  at::Tensor owned = next.ge(offset).logical_and(next.lt(offset + width));
  return {owned, (next - offset).clamp(0, width - 1).unsqueeze(1)};
}

struct HeadStatsFn : torch::autograd::Function<HeadStatsFn> {
  static at::Tensor forward(AutogradContext *ctx, at::Tensor x, at::Tensor w,
                            at::Tensor next, bool logprobs, bool entropy,
                            int64_t chunkBytes, int64_t comm, int64_t offset,
                            double scale, bool entropyGrad) {
    auto *cm = reinterpret_cast<Communicator *>(comm);
    const int64_t N = x.size(0), width = w.size(0),
                  rows = logitRowsPerChunk(width, chunkBytes);
    const auto f32 = x.options().dtype(at::kFloat);
    at::Tensor out = at::empty({N, int64_t(logprobs) + int64_t(entropy)}, f32);
    at::Tensor lse = at::empty({N}, f32), h;
    if (entropy)
      h = at::empty({N}, f32);
    for (int64_t lo = 0; lo < N; lo += rows) {
      const int64_t n = std::min(rows, N - lo);
      at::Tensor z = chunkLogits(x.narrow(0, lo, n), w, scale), l;
      if (cm) {
        // Over the shards: the global max keeps exp in range (allGather, as
        // c10d's max would), then the sum of exponentials.
        at::Tensor m =
            std::get<0>(cm->allGather(z.amax(-1).unsqueeze(0)).max(0));
        at::Tensor sum = (z - m.unsqueeze(1)).exp_().sum(-1);
        cm->allReduceSum(sum);
        l = m + sum.log();
      } else {
        l = at::logsumexp(z, -1);
      }
      lse.narrow(0, lo, n).copy_(l);
      int64_t col = 0;
      if (logprobs) {
        at::Tensor picked;
        if (cm) { // the target's logit from the shard that owns it
          auto [owned, idx] = ownedIds(next.narrow(0, lo, n), offset, width);
          picked = z.gather(1, idx).squeeze(1).mul_(owned.to(at::kFloat));
          cm->allReduceSum(picked);
        } else {
          picked = z.gather(1, next.narrow(0, lo, n).unsqueeze(1)).squeeze(1);
        }
        out.select(1, col++).narrow(0, lo, n).copy_(picked - l);
      }
      if (entropy) {
        // H = lse - sum_j p_j z_j
        at::Tensor pz = (z - l.unsqueeze(1)).exp_().mul_(z).sum(-1);
        if (cm)
          cm->allReduceSum(pz);
        at::Tensor hc = l - pz;
        h.narrow(0, lo, n).copy_(hc);
        out.select(1, col).narrow(0, lo, n).copy_(hc);
      }
    }
    ctx->saved_data["logprobs"] = logprobs;
    ctx->saved_data["entropy"] = entropy;
    ctx->saved_data["entropyGrad"] = entropyGrad;
    ctx->saved_data["chunk"] = chunkBytes;
    ctx->saved_data["offset"] = offset;
    ctx->saved_data["scale"] = scale;
    ctx->save_for_backward({x, w, next, lse, h});
    return out;
  }

  // With the global log-sum-exp saved, each shard's gradient is local.
  static tensor_list backward(AutogradContext *ctx, tensor_list g) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &next = saved[2],
                     &lse = saved[3], &h = saved[4];
    const bool logprobs = ctx->saved_data["logprobs"].toBool(),
               entropy = ctx->saved_data["entropy"].toBool(),
               entropyGrad = ctx->saved_data["entropyGrad"].toBool();
    const bool needX = ctx->needs_input_grad(0),
               needW = ctx->needs_input_grad(1);
    const int64_t N = x.size(0), width = w.size(0),
                  offset = ctx->saved_data["offset"].toInt(),
                  rows = logitRowsPerChunk(width,
                                           ctx->saved_data["chunk"].toInt());
    const double scale = ctx->saved_data["scale"].toDouble();
    const at::Tensor grad = g[0].to(at::kFloat);
    at::Tensor gx, gw;
    if (needX)
      gx = at::empty(x.sizes(), x.options());
    for (int64_t lo = 0; lo < N; lo += rows) {
      const int64_t n = std::min(rows, N - lo);
      at::Tensor logp = chunkLogits(x.narrow(0, lo, n), w, scale)
                            .sub_(lse.narrow(0, lo, n).unsqueeze(1));
      at::Tensor p = logp.exp();
      at::Tensor gz;
      int64_t col = 0;
      if (logprobs) {
        // d lp/dz_k = [k = next] - p_k, the indicator on the owner's shard
        at::Tensor gl = grad.select(1, col++).narrow(0, lo, n);
        auto [owned, idx] = ownedIds(next.narrow(0, lo, n), offset, width);
        gz = p.neg().mul_(gl.unsqueeze(1));
        gz.scatter_add_(1, idx, gl.mul(owned.to(at::kFloat)).unsqueeze(1));
      }
      if (entropy && entropyGrad) {
        // dH/dz_k = -p_k (log p_k + H)
        at::Tensor ge = grad.select(1, col).narrow(0, lo, n).unsqueeze(1);
        at::Tensor t =
            logp.add_(h.narrow(0, lo, n).unsqueeze(1)).mul_(p).mul_(ge.neg());
        gz = gz.defined() ? gz.add_(t) : t;
      }
      if (!gz.defined()) // only a metric's entropy: no gradient through it
        gz = at::zeros_like(p);
      p.reset();
      logp.reset();
      if (scale != 1.0) // z = scale * (x w^T)
        gz.mul_(scale);
      at::Tensor gzc = gz.to(x.scalar_type());
      gz.reset();
      if (needX) {
        at::Tensor rowsOut = gx.narrow(0, lo, n); // contiguous rows
        at::mm_out(rowsOut, gzc, w);
      }
      if (needW) { // summed over chunks in fp32, cast once at the end
        at::Tensor part = at::mm(gzc.t(), x.narrow(0, lo, n));
        if (lo)
          gw.add_(part);
        else // a single chunk's needs no sum
          gw = n == N ? part : part.to(at::kFloat);
      }
    }
    if (needW && !gw.defined()) // no positions
      gw = at::zeros_like(w);
    return {gx,           needW ? gw.to(w.scalar_type()) : at::Tensor(),
            at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

} // namespace

at::Tensor rlhf::fusedHeadStats(const at::Tensor &x, const at::Tensor &w,
                                const at::Tensor &next, bool logprobs,
                                bool entropy, Communicator *tp, int64_t offset,
                                int64_t chunkBytes, double scale,
                                bool entropyGrad) {
  return HeadStatsFn::apply(x, w, next, logprobs, entropy, chunkBytes,
                            reinterpret_cast<int64_t>(tp), offset, scale,
                            entropyGrad);
}
