//===- ZeroBench.cpp - Adam with and without ZeRO-1 slicing ---------------===//
//
// Run under rlhf-run: `rlhf-run -n 4 build/bin/rlhf-bench-zero`. Every worker
// is one data-parallel rank of a ~59M-parameter LLaMA (fp32) with its own
// gradients, and runs the optimizer half of a train step twice in the same
// run: gradients all-reduced and Adam on whole moments on every rank, and
// ZeRO-1 (gradients reduce-scattered, each rank updating its slice of the
// moments and parameters, then the ranks all-gathering the slices). Rank 0
// prints the moment bytes per rank and the step time of both, and their
// ratios.
//
//===----------------------------------------------------------------------===//

#include "RuntimeBench.h"
#include "rlhf/runtime/Train.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cstdio>

using namespace rlhf;
using Clock = std::chrono::steady_clock;

int main(int argc, char **argv) {
  int rc = 0;
  if (rlhf::bench::workerArgsHandled(
          argc, argv,
          "usage: rlhf-run -n N build/bin/rlhf-bench-zero\n"
          "the optimizer half of a train step with whole moments on every "
          "rank beside ZeRO-1 (reduce-scatter, sliced Adam, all-gather), "
          "over Gloo; prints the moment bytes per rank and both step "
          "times.\nTakes no arguments.\n",
          rc))
    return rc;
  return runGlooWorker([](Communicator &world) {
    ModelConfig cfg;
    cfg.shape = ModelShape{8, 512, 8, 8, 1408, 32000, false, false};
    ParamMap whole = initParams(cfg, 1), sliced = initParams(cfg, 1);
    // Different gradients on every rank, as before the dp reduction; in
    // multiples of 2^-20, so that sums in any order are exact and both paths
    // must give the same parameters bit for bit.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(7 + world.rank());
    std::map<std::string, at::Tensor> grads;
    for (auto &[n, p] : whole)
      grads[n] = at::round(at::randn(p.sizes(), gen) * 1024) / double(1 << 20);
    AdamSettings as;
    Adam plain(as), zero(as);
    auto step = [&](Adam &opt, ParamMap &params, Communicator *group) {
      std::vector<at::Tensor> local;
      for (auto &[n, g] : grads)
        local.push_back(g);
      std::vector<at::Tensor> sums =
          reduceGradients(group ? *group : world, local, group != nullptr);
      std::map<std::string, at::Tensor> reduced;
      size_t i = 0;
      for (auto &[n, g] : grads)
        reduced[n] = sums[i++];
      opt.step(params, reduced, group);
    };
    const int steps = 5;
    auto timeSteps = [&](Adam &opt, ParamMap &params, Communicator *group) {
      step(opt, params, group); // the first step allocates the moments
      world.barrier();
      auto t0 = Clock::now();
      for (int i = 0; i < steps; ++i)
        step(opt, params, group);
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
          "%d ranks, %.1fM parameters, gradient reduction and Adam step\n",
          world.size(), params / 1e6);
      std::printf("%-24s %14s %12s\n", "", "moments MB/rank", "step ms");
      std::printf("%-24s %14.1f %12.1f\n", "all-reduce, whole",
                  bytes(plain) / 1e6, plainS * 1e3);
      std::printf("%-24s %14.1f %12.1f\n", "ZeRO-1 (reduce-scatter)",
                  bytes(zero) / 1e6, zeroS * 1e3);
      std::printf(
          "ratio ZeRO/whole: moments %.3fx, step time %.2fx; parameters "
          "max abs diff %.3g\n",
          bytes(zero) / bytes(plain), zeroS / plainS, diff);
    }
    if (diff != 0)
      std::fprintf(stderr, "rank %d: parameters differ by %g\n", world.rank(),
                   diff);
    return diff == 0 ? 0 : 1;
  });
}
