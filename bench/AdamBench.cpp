//===- AdamBench.cpp - the fused Adam step beside separate ops ------------===//
//
// `rlhf-bench-adam [--cpu]`: one AdamW step over a whole model's parameters,
// through ATen's fused multi-tensor kernel (AdamSettings::fused, the
// default) and through the same update as separate ops per parameter, side
// by side in one run: with fp32 weights, and with bf16 weights on fp32
// masters as a train call holds them. On a GPU (the default where one is
// visible) the model has the shapes of four LLaMA-2 7B layers with its
// embedding and head (1.07B parameters, the GPU benchmark's llama2_7b_l4);
// on the CPU a 59M-parameter one. Each row also checks that both paths
// leave the same weights. The last line is the headline:
// `fused/separate Adam step speedup: X.XXx`.
//
//===----------------------------------------------------------------------===//

#include "RuntimeBench.h"

#include "rlhf/runtime/Model.h"
#include "rlhf/runtime/ReallocPlan.h"
#include "rlhf/runtime/Train.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>

using namespace rlhf;

namespace {

struct Row {
  double separate, fused, diff;
};

Row measure(const ModelShape &shape, c10::Device device, at::ScalarType dtype,
            int reps) {
  // Drawn on the device (a billion host draws would take longer than the
  // steps): weights of the model's shapes, and fp32 gradients, as the train
  // step's accumulators hold them. Both paths start from the same values.
  at::manual_seed(7);
  ParamMap a, b;
  std::map<std::string, at::Tensor> grads;
  const auto on = at::TensorOptions().device(device).dtype(at::kFloat);
  for (const ParamSpec &s : llamaParams(shape)) {
    std::vector<int64_t> dims{s.rows};
    if (!s.vector())
      dims.push_back(s.cols);
    a[s.name] = (at::randn(dims, on) * 0.02).to(dtype);
    b[s.name] = a[s.name].clone();
    grads[s.name] = at::randn(dims, on) * 1e-2;
  }
  AdamSettings fusedSettings, separateSettings;
  fusedSettings.weightDecay = separateSettings.weightDecay = 0.01;
  separateSettings.fused = false;
  Adam fused(fusedSettings), separate(separateSettings);
  auto time = [&](Adam &opt, ParamMap &params) {
    opt.step(params, grads); // the first step makes the moments and masters
    return bench::meanSeconds(device, reps, [&] { opt.step(params, grads); });
  };
  Row r;
  r.separate = time(separate, a);
  r.fused = time(fused, b);
  r.diff = 0;
  for (auto &[n, p] : a)
    r.diff = std::max(
        r.diff,
        (p.to(at::kFloat) - b.at(n).to(at::kFloat)).abs().max().item<double>());
  return r;
}

} // namespace

int main(int argc, char **argv) {
  std::optional<c10::Device> chosen =
      bench::deviceFromArgs(argc, argv, "rlhf-bench-adam");
  if (!chosen)
    return 2;
  const c10::Device device = *chosen;
  const bool gpu = device.is_cuda();
  const ModelShape shape =
      gpu ? ModelShape{4, 4096, 32, 32, 11008, 32000, false, false}
          : ModelShape{8, 512, 8, 8, 1408, 32000, false, false};
  int64_t n = 0;
  for (const ParamSpec &s : llamaParams(shape))
    n += s.numel();
  const int reps = gpu ? 10 : 3;
  std::printf("AdamW step over %.1fM parameters on %s, mean of %d steps\n",
              double(n) / 1e6, gpu ? "cuda:0" : "the CPU", reps);
  std::printf("%-28s %12s %12s %9s %14s\n", "weights", "separate ms",
              "fused ms", "speedup", "max |diff|");
  double logSum = 0;
  int rows = 0;
  for (auto [name, dtype] :
       {std::pair<const char *, at::ScalarType>{"fp32", at::kFloat},
        {"bf16 on fp32 masters", at::kBFloat16}}) {
    Row r = measure(shape, device, dtype, reps);
    std::printf("%-28s %12.1f %12.1f %8.2fx %14.3g\n", name, r.separate * 1e3,
                r.fused * 1e3, r.separate / r.fused, r.diff);
    logSum += std::log(r.separate / r.fused);
    ++rows;
  }
  std::printf("fused/separate Adam step speedup: %.2fx\n",
              std::exp(logSum / rows));
  return 0;
}
