//===- PipelineBench.cpp - 1F1B beside one stage at a time ----------------===//
//
// Run under rlhf-run: `rlhf-run -n P build/bin/rlhf-bench-pipeline`. The P
// workers are the P stages of one pipeline of a small LLaMA (fp32, one
// thread each), and each train step (sft_loss, Adam) runs its micro-batches
// in both orders, alternating, in the same run: 1F1B (runtime/lib/
// Pipeline.h, the order the cost model prices) and one micro-batch at a
// time through every stage (the runtime's order before it). Rank 0 prints
// per micro-batch count the step times, their ratio and the ratio an ideal
// pipeline would reach, M x P / (M + P - 1); the last line is the geomean.
//
//===----------------------------------------------------------------------===//

#include "../test/unit/LossBatches.h"
#include "../test/unit/StdlibFns.h"
#include "RuntimeBench.h"
#include "rlhf/runtime/Realloc.h"
#include "rlhf/runtime/Train.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

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
          "usage: rlhf-run -n N build/bin/rlhf-bench-pipeline\n"
          "a train step's micro-batches in 1F1B order beside one stage at a "
          "time, each rank one pipeline stage; prints the speedup per "
          "micro-batch count, last the geomean.\nTakes no arguments.\n",
          rc))
    return rc;
  return runGlooWorker([](Communicator &world) {
    at::set_num_threads(1); // a stage per core, as a GPU per stage
    const int P = world.size(), stage = world.rank();
    ModelConfig cfg;
    cfg.shape = ModelShape{8, 256, 8, 8, 704, 8000, false, false};
    cfg.maxSeq = 128;
    const Layout layout{0, 1, 1, P};
    ParamMap full = initParams(cfg, 3);
    FnProgram sft = testfns::stdlibFn("sft_loss");
    const int64_t rowsPerMicro = 2, S = 64;
    if (stage == 0)
      std::printf("%d stages of a %lld-layer LLaMA (hidden %lld), fp32, one "
                  "thread each; micro-batches of %lld x %lld tokens; "
                  "sft_loss + Adam\n",
                  P, (long long)cfg.shape.layers, (long long)cfg.shape.hidden,
                  (long long)rowsPerMicro, (long long)S);
    if (stage == 0)
      std::printf("%14s %16s %10s %14s %8s\n", "micro-batches", "sequential ms",
                  "1F1B ms", "1F1B speedup", "ideal");
    double logSum = 0;
    int rows = 0;
    for (int64_t M : {int64_t(P), int64_t(2 * P), int64_t(4 * P)}) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
      at::Tensor tokens = at::randint(0, cfg.shape.vocab, {M * rowsPerMicro, S},
                                      gen, at::kLong);
      TrainBatch batch = testfns::randomLossBatch("sft_loss", tokens);
      double best[2] = {INFINITY, INFINITY};
      for (int rep = 0; rep < 3; ++rep)
        for (bool sequential : {true, false}) {
          ParamMap shard = layoutShard(cfg, full, layout, stage);
          for (auto &[n, t] : shard)
            t = t.detach().requires_grad_(true);
          LlamaModel model(cfg, shard, {}, {&world, stage, P});
          Adam opt{AdamSettings{}};
          TrainOptions o;
          o.loss = &sft;
          o.microBatches = M;
          o.sequentialPipeline = sequential;
          world.barrier();
          auto t0 = Clock::now();
          trainStep(model, opt, batch, o);
          world.barrier();
          double s = std::chrono::duration<double>(Clock::now() - t0).count();
          best[sequential] = std::min(best[sequential], s);
        }
      const double speedup = best[1] / best[0];
      const double ideal = double(M * P) / double(M + P - 1);
      logSum += std::log(speedup);
      ++rows;
      if (stage == 0)
        std::printf("%14lld %16.1f %10.1f %14.2f %8.2f\n", (long long)M,
                    best[1] * 1e3, best[0] * 1e3, speedup, ideal);
    }
    if (stage == 0)
      std::printf("1F1B/sequential speedup geomean: %.2f\n",
                  std::exp(logSum / rows));
    return 0;
  });
}
