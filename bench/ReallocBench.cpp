//===- ReallocBench.cpp - reallocation vs a copy of the same bytes --------===//
//
// `rlhf-run -n 4 build/bin/rlhf-bench-realloc` (or torchrun --no-python).
// Moves a LLaMA-shaped model between layouts across the workers and, in the
// same run, times every rank copying the number of bytes it received or
// kept at once: memcpy on the CPU (Gloo on loopback), a device-to-device
// copy on a GPU the ranks share (CUDA IPC reads, or host memory with
// RLHF_CUDA_IPC=0). Rank 0 prints both per layout pair and the copy's time
// over the reallocation's, the fraction of a copy's speed it reaches; the
// last line is the worst pair's. On a GPU the model is LLaMA-2 7B's width
// truncated to 4 layers, in bf16; on the CPU a small one in fp32.
//
//===----------------------------------------------------------------------===//

#include "RuntimeBench.h"

#include "rlhf/runtime/Device.h"
#include "rlhf/runtime/Realloc.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

using namespace rlhf;
using Clock = std::chrono::steady_clock;

int main(int argc, char **argv) {
  int rc = 0;
  if (rlhf::bench::workerArgsHandled(
          argc, argv,
          "usage: rlhf-run -n N build/bin/rlhf-bench-realloc\n"
          "moves a LLaMA-shaped model between layouts and, in the same run, "
          "times "
          "a copy of the same bytes (device to device on a shared GPU, "
          "memcpy on the CPU); prints the copy's time over the "
          "reallocation's per layout pair, last the worst pair's.\nTakes no "
          "arguments.\n",
          rc))
    return rc;
  return runWorker([](Communicator &world, c10::Device device) {
    const int n = world.size();
    const bool gpu = device.is_cuda();
    ModelConfig cfg;
    cfg.shape = gpu ? ModelShape{4, 4096, 32, 32, 11008, 32000, false, false}
                    : ModelShape{8, 512, 8, 8, 1408, 32000, false, false};
    const at::ScalarType dtype =
        selectPrecision(RendezvousConfig::fromEnv(), device);
    const auto opts = at::TensorOptions().dtype(dtype).device(device);
    auto sync = [&] {
      bench::synchronize(device);
      world.barrier();
    };
    // Drawn where it is used: 1.07B host samples cost each rank seconds.
    ParamMap full = initParams(cfg, 1, opts);
    struct Case {
      const char *name;
      Layout from, to;
    };
    std::vector<Case> cases = {
        {"tp -> dp (gather)", {0, 1, n, 1}, {0, n, 1, 1}},
        {"dp -> tp (drop)", {0, n, 1, 1}, {0, 1, n, 1}},
        {"tp -> pp", {0, 1, n, 1}, {0, 1, 1, n}},
        {"pp -> tp", {0, 1, 1, n}, {0, 1, n, 1}},
    };
    if (world.rank() == 0)
      std::printf("%d ranks on %s, %s weights, %s\n%-20s %12s %12s %12s %12s "
                  "%9s %9s\n",
                  n, device.str().c_str(), at::toString(dtype),
                  gpu ? "copy = device to device" : "copy = memcpy", "layouts",
                  "MB/rank in", "realloc ms", "copy ms", "copy/realloc",
                  "map ms", "exch ms");
    const int reps = gpu ? 5 : 1;
    double worst = 1e30, logSum = 0;
    for (const Case &c : cases) {
      // One block per shard, as the runtime holds one (flatShard), copied
      // out of the full model.
      ParamMap shard = layoutShard(cfg, full, c.from, world.rank());
      // The first move maps peers' memory and warms the allocator.
      ReallocStats st;
      reallocate(cfg, shard, c.from, c.to, world, nullptr, opts);
      sync();
      auto t0 = Clock::now();
      // Rank 0's host time mapping peers' memory and exchanging with them
      // (waits included), per move: where a slow move's time goes.
      double mapS = 0, exchS = 0;
      for (int r = 0; r < reps; ++r) {
        st = {};
        reallocate(cfg, shard, c.from, c.to, world, &st, opts);
        mapS += st.mapSeconds / reps;
        exchS += st.exchangeSeconds / reps;
      }
      sync();
      double reallocS =
          std::chrono::duration<double>(Clock::now() - t0).count() / reps;
      // The same bytes copied on every rank at once.
      int64_t bytes = std::max<int64_t>(st.bytesReceived + st.bytesLocal, 2);
      at::Tensor src = at::rand({bytes / 2}, opts.dtype(at::kBFloat16)),
                 dst = at::empty_like(src);
      dst.copy_(src); // warm the pages
      sync();
      auto t1 = Clock::now();
      for (int r = 0; r < reps; ++r)
        dst.copy_(src);
      sync();
      double copyS =
          std::chrono::duration<double>(Clock::now() - t1).count() / reps;
      at::Tensor in = at::full({1}, double(bytes), at::kDouble);
      world.allReduceSum(in);
      double ratio = copyS / reallocS;
      worst = std::min(worst, ratio);
      logSum += std::log(ratio);
      if (world.rank() == 0)
        std::printf("%-20s %12.1f %12.2f %12.2f %12.3f %9.2f %9.2f\n", c.name,
                    in.item<double>() / n / 1e6, reallocS * 1e3, copyS * 1e3,
                    ratio, mapS * 1e3, exchS * 1e3);
    }
    // As the world found when it was created (a probe each rank mapped).
    if (gpu && n > 1 && world.rank() == 0)
      std::printf("ranks 0 and 1 shared the GPU's memory %s\n",
                  world.sharesDevice(1) ? "through CUDA IPC"
                                        : "through host memory");
    if (world.rank() == 0)
      std::printf("realloc speed / copy speed: geomean %.3f, worst pair %.3f\n",
                  std::exp(logSum / double(cases.size())), worst);
    return 0;
  });
}
