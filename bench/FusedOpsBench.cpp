//===- FusedOpsBench.cpp - fused SwiGLU and rotary beside separate ops ----===//
//
// `rlhf-bench-fused-ops [--cpu]`: the model's SwiGLU and rotary embedding
// as one kernel each (FusedOps.h) and as LibTorch's separate ops with
// their autograd (what the model runs with RLHF_FUSED_KERNELS=0, less the
// replayed SwiGLU's recomputation), side by side in one run. Rows take
// LLaMA-2 7B's decode step at batch 1 and 64 (no gradients) and a
// TinyLlama train call's 16 x 512 tokens (forward and backward). On the CPU
// the fused ops run their host bodies at smaller shapes: a smoke run. Each
// row also prints the largest difference between the two results. The last
// line is the headline: `fused/separate elementwise speedup: X.XXx`.
//
//===----------------------------------------------------------------------===//

#include "FusedOps.h"
#include "RuntimeBench.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

using namespace rlhf;

namespace {

std::pair<at::Tensor, at::Tensor> rotaryOps(const at::Tensor &q,
                                            const at::Tensor &k,
                                            const at::Tensor &cos,
                                            const at::Tensor &sin) {
  return {fused::rotaryOps(q, cos, sin), fused::rotaryOps(k, cos, sin)};
}

/// Mean seconds per call of `f` after two warm-up calls.
double timeIt(c10::Device device, int reps, const std::function<void()> &f) {
  f();
  f();
  return bench::meanSeconds(device, reps, f);
}

double maxDiff(const at::Tensor &a, const at::Tensor &b) {
  return (a.to(at::kFloat) - b.to(at::kFloat)).abs().max().item<double>();
}

struct Row {
  std::string what;
  double separate, fused, diff;
};

/// SwiGLU over [tokens, inter]: gate and up as the halves of one
/// projection's output, as the model holds them; `train` adds backward.
Row swiGluRow(const std::string &what, int64_t tokens, int64_t inter,
              bool train, at::TensorOptions o, int reps) {
  at::Tensor y = at::randn({tokens, 2 * inter}, o);
  at::Tensor g = y.narrow(-1, 0, inter), u = y.narrow(-1, inter, inter);
  if (train) {
    g = g.contiguous().requires_grad_(true);
    u = u.contiguous().requires_grad_(true);
  }
  at::Tensor dy = at::randn({tokens, inter}, o);
  auto pass = [&](bool fused) {
    at::AutoGradMode grad(train);
    at::Tensor out = fused ? fused::swiGlu(g, u) : fused::swiGluOps(g, u);
    if (train)
      out.backward(dy);
    return out;
  };
  Row r{what, 0, 0, maxDiff(pass(true).detach(), pass(false).detach())};
  r.separate = timeIt(o.device(), reps, [&] { pass(false); });
  r.fused = timeIt(o.device(), reps, [&] { pass(true); });
  return r;
}

/// Rotary of q [B, H, S, D] and k [B, KV, S, D] laid out as the layer's
/// projections leave them; `train` adds backward.
Row rotaryRow(const std::string &what, int64_t B, int64_t S, int64_t H,
              int64_t KV, int64_t D, bool train, at::TensorOptions o,
              int reps) {
  at::Tensor q = at::randn({B, S, H * D}, o).view({B, S, H, D}).transpose(1, 2),
             k = at::randn({B, S, KV * D}, o)
                     .view({B, S, KV, D})
                     .transpose(1, 2);
  at::Tensor f = at::arange(S, o.dtype(at::kFloat)).unsqueeze(-1) *
                 at::rand({D / 2}, o.dtype(at::kFloat));
  at::Tensor cos = at::cat({f.cos(), f.cos()}, -1).expand({B, 1, S, D}).to(o),
             sin = at::cat({-f.sin(), f.sin()}, -1).expand({B, 1, S, D}).to(o);
  cos = cos.contiguous();
  sin = sin.contiguous();
  if (train) {
    q.requires_grad_(true);
    k.requires_grad_(true);
  }
  at::Tensor dq = at::randn(q.sizes(), o), dk = at::randn(k.sizes(), o);
  auto pass = [&](bool fused) {
    at::AutoGradMode grad(train);
    auto [a, b] = fused ? fused::rotary(q, k, cos, sin)
                        : rotaryOps(q, k, cos, sin);
    if (train)
      torch::autograd::backward({a, b}, {dq, dk});
    return a.detach();
  };
  Row r{what, 0, 0, maxDiff(pass(true), pass(false))};
  r.separate = timeIt(o.device(), reps, [&] { pass(false); });
  r.fused = timeIt(o.device(), reps, [&] { pass(true); });
  return r;
}

} // namespace

int main(int argc, char **argv) {
  std::optional<c10::Device> chosen =
      bench::deviceFromArgs(argc, argv, "rlhf-bench-fused-ops");
  if (!chosen)
    return 2;
  const c10::Device device = *chosen;
  const bool gpu = device.is_cuda();
  const auto o = at::TensorOptions().device(device).dtype(at::kBFloat16);
  // The CPU's smoke shapes are an eighth of each dimension or less.
  const int64_t div = gpu ? 1 : 8;
  const int reps = gpu ? 100 : 3;
  std::printf("fused SwiGLU and rotary beside separate ops, bf16, on %s, "
              "mean of %d calls\n",
              gpu ? "cuda:0" : "the CPU (host bodies; a smoke run)", reps);
  std::vector<Row> rows{
      swiGluRow("swiglu 7B decode, batch 1", 1, 11008 / div, false, o, reps),
      swiGluRow("swiglu 7B decode, batch 64", 64, 11008 / div, false, o, reps),
      rotaryRow("rotary 7B decode, batch 1", 1, 1, 32, 32, 128, false, o, reps),
      rotaryRow("rotary 7B decode, batch 64", 64, 1, 32, 32, 128, false, o,
                reps),
      swiGluRow("swiglu TinyLlama train 16x512", 8192 / div / div, 5632 / div,
                true, o, reps),
      rotaryRow("rotary TinyLlama train 16x512", 16 / div, 512 / div, 32, 4, 64,
                true, o, reps)};
  std::printf("%-32s %12s %12s %9s %12s\n", "op", "separate us", "fused us",
              "speedup", "max |diff|");
  double logSum = 0;
  for (const Row &r : rows) {
    std::printf("%-32s %12.1f %12.1f %8.2fx %12.3g\n", r.what.c_str(),
                r.separate * 1e6, r.fused * 1e6, r.separate / r.fused, r.diff);
    logSum += std::log(r.separate / r.fused);
  }
  std::printf("fused/separate elementwise speedup: %.2fx\n",
              std::exp(logSum / double(rows.size())));
  return 0;
}
