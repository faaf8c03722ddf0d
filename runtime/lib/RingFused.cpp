//===- RingFused.cpp - ring attention with a fused kernel per block -------===//
//
// RingKernel::Fused, the way ring-flash-attention computes ring attention:
// every rectangle of a key/value block runs LibTorch's fused attention
// (FlashAttention-2 on CUDA, the blocked flash kernel on the CPU), which
// returns its output and log-sum-exp, and the rectangles merge in fp32 as
// an online softmax. Backward calls the fused backward per rectangle with
// the whole attention's output and log-sum-exp, so each rectangle's
// probabilities and the softmax's row term (dOut . out) are the global
// ones and its gradients exactly that rectangle's share. No score matrix is
// held: the explicit kernel's is rows x keys x heads in fp32 per sequence,
// 8 GiB at 8K positions a rank and 32 heads.
//
// The fused kernels take no mask but the plain causal one, so masked
// rectangles stay apart (planBlocks' keepDiagonals) and each pairs the same
// positions: zigzag's own block is its two causal chunks and the later
// chunk's queries against the earlier chunk's keys, unmasked. Grouped KV
// heads go in as they are where the kernel takes them (fusedRingKvRepeat).
//
//===----------------------------------------------------------------------===//

#include "RingBlocks.h"

#include "rlhf/runtime/Attention.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

using namespace rlhf;
using namespace rlhf::parallel;
using namespace rlhf::parallel::ring;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

namespace {

/// A block's keys or values [B, Hkv, c, D] as the kernel takes them: as
/// they are where it reads each KV head for its group of g query heads
/// (`g` 1), else repeated per query head [B, H, c, D], a copy of the block's
/// keys, not of its scores.
at::Tensor perQueryHead(const at::Tensor &t, int64_t g) {
  return g == 1 ? t.contiguous() : t.repeat_interleave(g, 1);
}

/// A key gradient per KV head: per query head, summed over each group.
at::Tensor perKvHead(const at::Tensor &t, int64_t g) {
  if (g == 1)
    return t;
  return t.reshape({t.size(0), t.size(1) / g, g, t.size(2), t.size(3)}).sum(2);
}

at::Tensor rowsOf(const at::Tensor &t, const Block &b) {
  return t.narrow(2, b.row, b.rows).contiguous();
}

/// The query x key pairs a rectangle shows: a causal one its lower
/// triangle, as the fused kernel skips the rest.
int64_t pairs(const at::Tensor &q, const Block &b) {
  const int64_t area = b.diagonal ? b.rows * (b.rows + 1) / 2 : b.rows * b.cols;
  return q.size(0) * q.size(1) * area;
}

/// One rectangle's fused forward and backward. CUDA's flash forward returns
/// its RNG state, which its backward takes (unused without dropout; passed
/// back as autograd would), so the forward keeps each rectangle's in order.
struct Kernel {
  double scale;
  std::vector<at::Tensor> rng;

  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor &q,
                                             const at::Tensor &k,
                                             const at::Tensor &v, bool causal) {
    if (q.is_cuda()) {
      auto r = at::_scaled_dot_product_flash_attention(
          q, k, v, 0.0, causal, /*return_debug_mask=*/false, scale);
      rng.push_back(std::get<6>(r));
      rng.push_back(std::get<7>(r));
      return {std::get<0>(r), std::get<1>(r)};
    }
    return at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal,
                                                           std::nullopt, scale);
  }

  std::tuple<at::Tensor, at::Tensor, at::Tensor>
  backward(const at::Tensor &dOut, const at::Tensor &q, const at::Tensor &k,
           const at::Tensor &v, const at::Tensor &out, const at::Tensor &lse,
           bool causal, size_t index) const {
    if (q.is_cuda())
      return at::_scaled_dot_product_flash_attention_backward(
          dOut, q, k, v, out, lse, /*cum_seq_q=*/at::Tensor(),
          /*cum_seq_k=*/at::Tensor(), q.size(2), k.size(2), 0.0, causal,
          rng.at(2 * index), rng.at(2 * index + 1), scale);
    return at::_scaled_dot_product_flash_attention_for_cpu_backward(
        dOut, q, k, v, out, lse, 0.0, causal, std::nullopt, scale);
  }
};

/// Whether LibTorch chooses its flash kernel for one position of `q` over
/// `kvHeads` heads of keys shaped as `k`'s. The keys stand in uninitialised:
/// the choice reads no values, and this runs per layer, so it launches no
/// copy.
bool choosesFlash(const at::Tensor &q, const at::Tensor &k, int64_t kvHeads) {
  const at::Tensor keys =
      at::empty({k.size(0), kvHeads, 1, k.size(3)}, k.options());
  return sdpChoosesFlash(q.narrow(2, 0, 1), keys, keys,
                         /*enableGqa=*/kvHeads != q.size(1));
}

// Autograd functions take the communicator as an integer handle.
struct RingFused : torch::autograd::Function<RingFused> {
  static at::Tensor forward(AutogradContext *ctx, at::Tensor q, at::Tensor k,
                            at::Tensor v, int64_t c,
                            std::vector<int64_t> flat) {
    auto *comm = reinterpret_cast<Communicator *>(c);
    const RingLayout layout = unflatten(flat);
    const int64_t g = fusedRingKvRepeat(q, k);
    q = q.contiguous();
    Kernel kernel{1.0 / std::sqrt(double(q.size(3))), {}};
    const auto fp32 = q.options().dtype(at::kFloat);
    at::Tensor out = at::zeros(q.sizes(), fp32);
    at::Tensor lse = at::full({q.size(0), q.size(1), q.size(2)},
                              -std::numeric_limits<float>::infinity(), fp32);
    // Every rectangle is causal or unmasked, so each of its rows sees a key
    // and every log-sum-exp is finite.
    auto visit = [&](int, const at::Tensor &kv, const Block &b) {
      auto [o, l] =
          kernel.forward(rowsOf(q, b), perQueryHead(colsOf(kv[0], b), g),
                         perQueryHead(colsOf(kv[1], b), g), b.diagonal);
      merge(out.narrow(2, b.row, b.rows), lse.narrow(2, b.row, b.rows), o, l);
      workCounter(false) += pairs(q, b);
    };
    // Keys and values travel together, in the compute dtype.
    circulate(comm, layout, /*keepDiagonals=*/true,
              at::stack({k, v}).contiguous(), visit, [] {});
    at::Tensor result = out.to(q.scalar_type());
    ctx->saved_data["comm"] = c;
    ctx->saved_data["layout"] = flat;
    ctx->saved_data["rng"] = kernel.rng;
    ctx->saved_data["repeat"] = g;
    ctx->save_for_backward({q, k, v, result, lse});
    return result;
  }

  static tensor_list backward(AutogradContext *ctx, tensor_list grads) {
    const tensor_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2],
                     &result = saved[3], &lse = saved[4];
    auto *comm =
        reinterpret_cast<Communicator *>(ctx->saved_data["comm"].toInt());
    const RingLayout layout =
        unflatten(ctx->saved_data["layout"].toIntVector());
    const int64_t g = ctx->saved_data["repeat"].toInt();
    const Kernel kernel{1.0 / std::sqrt(double(q.size(3))),
                        ctx->saved_data["rng"].toTensorVector()};
    at::Tensor dOut = grads[0].to(q.scalar_type()).contiguous();
    at::Tensor dq = at::zeros(q.sizes(), q.options().dtype(at::kFloat));
    size_t index = 0; // rectangles in the forward's order
    auto visit = [&](int, const at::Tensor &kv, at::Tensor &dkv,
                     const Block &b) {
      auto [dqb, dkb, dvb] = kernel.backward(
          rowsOf(dOut, b), rowsOf(q, b), perQueryHead(colsOf(kv[0], b), g),
          perQueryHead(colsOf(kv[1], b), g), rowsOf(result, b), rowsOf(lse, b),
          b.diagonal, index++);
      dq.narrow(2, b.row, b.rows).add_(dqb);
      colsOf(dkv[0], b).add_(perKvHead(dkb, g));
      colsOf(dkv[1], b).add_(perKvHead(dvb, g));
      workCounter(true) += pairs(q, b);
    };
    const at::Tensor dkv =
        circulateGradients(comm, layout, /*keepDiagonals=*/true,
                           at::stack({k, v}).contiguous(), visit);
    return {dq.to(q.scalar_type()), dkv[0].to(k.scalar_type()),
            dkv[1].to(v.scalar_type()), at::Tensor(), at::Tensor()};
  }
};

} // namespace

bool parallel::fusedRingApplies(const at::Tensor &q, const at::Tensor &k,
                                const at::Tensor &v, const RingLayout &layout,
                                int rank) {
  if (q.scalar_type() != k.scalar_type() ||
      k.scalar_type() != v.scalar_type() || !(q.is_cpu() || q.is_cuda()) ||
      q.size(2) == 0)
    return false;
  // SDPA pads CUDA head sizes to a multiple of 8 before its flash kernel;
  // the kernel itself takes only those.
  if (q.is_cuda() && q.size(3) % 8)
    return false;
  if (!masksAreCausal(layout, rank))
    return false;
  // One key per query head: fusedRingKvRepeat asks about grouped heads.
  return choosesFlash(q, k, q.size(1));
}

// FlashAttention-2 on CUDA and the CPU's flash kernel read one KV head per
// group of query heads, forward and backward (SDPA's enable_gqa, torch 2.5
// on).
int64_t parallel::fusedRingKvRepeat(const at::Tensor &q, const at::Tensor &k) {
  const int64_t g = q.size(1) / k.size(1);
  return g == 1 || choosesFlash(q, k, k.size(1)) ? 1 : g;
}

at::Tensor parallel::detail::ringAttentionFused(const at::Tensor &q,
                                                const at::Tensor &k,
                                                const at::Tensor &v,
                                                Communicator *ring,
                                                const RingLayout &layout) {
  return RingFused::apply(q, k, v, reinterpret_cast<int64_t>(ring),
                          flatten(layout));
}
