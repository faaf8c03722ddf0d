//===- ZeroBench.cpp - Adam with and without ZeRO-1 slicing ---------------===//
//
// Run under rlhf-run: `rlhf-run -n 4 build/bin/rlhf-bench-zero`. Every worker
// is one data-parallel rank of a ~59M-parameter LLaMA (fp32) and applies the
// same gradients with Adam twice in the same run: moments whole on every
// rank, and moments sliced over the ranks (ZeRO-1: each rank updates its
// slice, then the ranks all-gather the slices). Rank 0 prints the moment
// bytes per rank and the step time of both, and their ratios.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Train.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cstdio>

using namespace rlhf;
using Clock = std::chrono::steady_clock;

int main() {
  return runGlooWorker([](Communicator &world) {
    ModelConfig cfg;
    cfg.shape = ModelShape{8, 512, 8, 8, 1408, 32000, false, false};
    ParamMap whole = initParams(cfg, 1), sliced = initParams(cfg, 1);
    // The same gradients on every rank, as after the dp all-reduce.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
    std::map<std::string, at::Tensor> grads;
    for (auto &[n, p] : whole)
      grads[n] = at::randn(p.sizes(), gen) * 1e-3;
    AdamSettings as;
    Adam plain(as), zero(as);
    const int steps = 5;
    auto timeSteps = [&](Adam &opt, ParamMap &params, Communicator *group) {
      opt.step(params, grads, group); // the first step allocates the moments
      world.barrier();
      auto t0 = Clock::now();
      for (int i = 0; i < steps; ++i)
        opt.step(params, grads, group);
      world.barrier();
      return std::chrono::duration<double>(Clock::now() - t0).count() / steps;
    };
    double plainS = timeSteps(plain, whole, nullptr);
    double zeroS = timeSteps(zero, sliced, &world);
    auto bytes = [](Adam &opt) {
      double b = 0;
      for (auto *m : {&opt.moments1(), &opt.moments2()})
        for (auto &[n, t] : *m)
          b += double(t.numel() * t.element_size());
      return b;
    };
    double diff = 0, params = 0;
    for (auto &[n, p] : whole) {
      diff = std::max(diff, (p - sliced.at(n)).abs().max().item<double>());
      params += double(p.numel());
    }
    if (world.rank() == 0) {
      std::printf(
          "%d ranks, %.1fM parameters, Adam step over the whole model\n",
          world.size(), params / 1e6);
      std::printf("%-24s %14s %12s\n", "", "moments MB/rank", "step ms");
      std::printf("%-24s %14.1f %12.1f\n", "moments whole", bytes(plain) / 1e6,
                  plainS * 1e3);
      std::printf("%-24s %14.1f %12.1f\n", "ZeRO-1 (sliced)", bytes(zero) / 1e6,
                  zeroS * 1e3);
      std::printf(
          "ratio ZeRO/whole: moments %.3fx, step time %.2fx; parameters "
          "max abs diff %.3g\n",
          bytes(zero) / bytes(plain), zeroS / plainS, diff);
    }
    if (diff >= 1e-6)
      std::fprintf(stderr, "rank %d: parameters differ by %g\n", world.rank(),
                   diff);
    return diff < 1e-6 ? 0 : 1;
  });
}
