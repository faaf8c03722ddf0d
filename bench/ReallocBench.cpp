//===- ReallocBench.cpp - reallocation vs memcpy of the same bytes --------===//
//
// Run under rlhf-run: `rlhf-run -n 4 build/bin/rlhf-bench-realloc`. Moves a
// ~50M-parameter LLaMA (fp32) between layouts across the workers over Gloo
// on loopback, and in the same run times a plain memcpy of the bytes each
// rank received. Rank 0 prints both and their ratio per layout pair.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Realloc.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>

using namespace rlhf;
using Clock = std::chrono::steady_clock;

int main() {
  return runGlooWorker([](Communicator &world) {
    const int n = world.size();
    ModelConfig cfg;
    cfg.shape = ModelShape{8, 512, 8, 8, 1408, 32000, false, false};
    ParamMap full = initParams(cfg, 1);
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
      std::printf("%-20s %12s %12s %12s %8s\n", "layouts", "MB/rank in", "realloc ms",
                  "memcpy ms", "ratio");
    for (const Case &c : cases) {
      ParamMap mine = layoutShard(cfg, full, c.from, world.rank());
      ReallocStats st;
      world.barrier();
      auto t0 = Clock::now();
      ParamMap moved = reallocate(cfg, mine, c.from, c.to, world, &st);
      world.barrier();
      double reallocS = std::chrono::duration<double>(Clock::now() - t0).count();
      // The same bytes through memory, on every rank at once.
      int64_t bytes = std::max<int64_t>(st.bytesReceived + st.bytesLocal, 4);
      at::Tensor src = at::rand({bytes / 4}), dst = at::empty({bytes / 4});
      dst.copy_(src); // warm the pages
      world.barrier();
      auto t1 = Clock::now();
      dst.copy_(src);
      world.barrier();
      double copyS = std::chrono::duration<double>(Clock::now() - t1).count();
      at::Tensor recv = at::full({1}, double(st.bytesReceived + st.bytesLocal));
      world.allReduceSum(recv);
      if (world.rank() == 0)
        std::printf("%-20s %12.1f %12.1f %12.1f %7.1fx\n", c.name,
                    recv.item<double>() / n / 1e6, reallocS * 1e3, copyS * 1e3,
                    reallocS / copyS);
    }
    return 0;
  });
}
