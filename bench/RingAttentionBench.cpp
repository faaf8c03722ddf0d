//===- RingAttentionBench.cpp - ring attention's two kernels side by side -===//
//
// `rlhf-bench-ring-attention [--cpu]`, alone (a ring of one: the whole
// sequence's causal attention) or under torchrun / rlhf-run (every rank a
// ring rank holding its zigzag chunks). Times one forward and backward of
// ring attention at LLaMA-3 8B's heads (32 query heads over 8 KV heads of
// 128) with RingKernel::Explicit (an fp32 score matrix per block) and
// RingKernel::Fused (LibTorch's flash kernel per block), side by side, with
// the allocator's peak of each and the largest difference of their outputs
// and gradients. bf16 on a GPU (where the fused kernel takes it), fp32 on
// the CPU. Rank 0 prints a row per sequence length; the last line is the
// headline: `fused/explicit ring attention speedup: X.XXx` (geomean).
//
//===----------------------------------------------------------------------===//

#include "RuntimeBench.h"

#include "RingAttention.h"
#include "rlhf/runtime/Device.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

using namespace rlhf;

namespace {

struct Run {
  double ms = 0, peakMiB = 0;
  at::Tensor out, dq, dk, dv;
};

} // namespace

int main(int argc, char **argv) {
  // runWorker picks the device: tell it this one.
  const std::optional<c10::Device> chosen =
      bench::deviceFromArgs(argc, argv, "rlhf-bench-ring-attention");
  if (!chosen)
    return 2;
  setenv("RLHF_DEVICE", chosen->is_cuda() ? "cuda" : "cpu", 1);
  return runWorker([](Communicator &world, c10::Device device) {
    const bool gpu = device.is_cuda();
    const int R = world.size(), r = world.rank();
    if (!gpu)
      trackHostAllocations(); // the CPU's tensor peak, as the allocator's
    const auto opts = at::TensorOptions().device(device).dtype(
        gpu ? at::kBFloat16 : at::kFloat);
    const int64_t B = 1, H = 32, Hkv = 8, D = 128;
    const int reps = gpu ? 5 : 2;
    std::vector<int64_t> lengths = gpu ? std::vector<int64_t>{2048, 4096, 8192}
                                       : std::vector<int64_t>{512, 1024, 2048};
    if (r == 0) {
      std::printf("ring attention forward + backward, %lld query heads over "
                  "%lld KV heads of %lld, batch %lld, ring of %d, on %s "
                  "(%s), mean of %d\n",
                  (long long)H, (long long)Hkv, (long long)D, (long long)B, R,
                  gpu ? "cuda" : "the CPU", gpu ? "bf16" : "fp32", reps);
      std::printf("%8s %8s %12s %10s %9s %14s %12s %11s\n", "sequence",
                  "per rank", "explicit ms", "fused ms", "speedup",
                  "explicit MiB", "fused MiB", "max |diff|");
    }
    double logSum = 0;
    int rows = 0;
    for (int64_t S : lengths) {
      S = (S + 2 * R - 1) / (2 * R) * (2 * R);
      const parallel::RingLayout layout = parallel::zigzagLayout(S, R);
      const int64_t n = S / R;
      auto gen = at::make_generator<at::CPUGeneratorImpl>(11 + r);
      auto input = [&](int64_t heads) {
        return at::randn({B, heads, n, D}, gen, at::kFloat).to(opts);
      };
      const at::Tensor q = input(H), k = input(Hkv), v = input(Hkv),
                       dOut = input(H);
      if (!parallel::fusedRingApplies(q, k, v, layout, r)) {
        if (r == 0)
          std::printf("%8lld: the fused kernel does not apply to these "
                      "tensors here; skipped\n",
                      (long long)S);
        continue;
      }
      auto once = [&](parallel::RingKernel kernel, Run &run) {
        at::Tensor qi = q.clone().requires_grad_(true),
                   ki = k.clone().requires_grad_(true),
                   vi = v.clone().requires_grad_(true);
        run.out = parallel::ringAttention(qi, ki, vi, &world, layout, kernel);
        run.out.backward(dOut);
        run.dq = qi.grad();
        run.dk = ki.grad();
        run.dv = vi.grad();
      };
      auto measure = [&](parallel::RingKernel kernel) {
        Run run;
        once(kernel, run); // warm-up (kernels, allocator)
        run = Run();
        bench::synchronize(device);
        world.barrier();
        resetPeakBytes(device);
        const double base = deviceCurrentBytes(device);
        run.ms =
            1e3 * bench::meanSeconds(device, reps, [&] { once(kernel, run); });
        run.peakMiB = (devicePeakBytes(device) - base) / (1 << 20);
        world.barrier();
        return run;
      };
      const Run exp = measure(parallel::RingKernel::Explicit);
      const Run fused = measure(parallel::RingKernel::Fused);
      double diff = 0;
      for (auto [a, b] :
           {std::pair(exp.out, fused.out), std::pair(exp.dq, fused.dq),
            std::pair(exp.dk, fused.dk), std::pair(exp.dv, fused.dv)})
        diff = std::max(
            diff,
            (a.to(at::kFloat) - b.to(at::kFloat)).abs().max().item<double>());
      // The slowest rank's time sets the ring's pace.
      const at::Tensor times = std::get<0>(
          world
              .allGather(at::tensor({exp.ms, fused.ms, diff}, at::kDouble)
                             .unsqueeze(0)
                             .to(device))
              .cpu()
              .max(0));
      const double speedup = times[0].item<double>() / times[1].item<double>();
      logSum += std::log(speedup);
      ++rows;
      if (r == 0)
        std::printf("%8lld %8lld %12.2f %10.2f %8.2fx %14.1f %12.1f %11.3g\n",
                    (long long)S, (long long)n, times[0].item<double>(),
                    times[1].item<double>(), speedup, exp.peakMiB,
                    fused.peakMiB, times[2].item<double>());
    }
    if (r == 0 && rows)
      std::printf("fused/explicit ring attention speedup: %.2fx\n",
                  std::exp(logSum / rows));
    return rows ? 0 : 77;
  });
}
