//===- CheckpointWorker.cpp - save under one plan, resume under another ---===//
//
// Four ranks train a tiny model one step under layout A (tp 2 x dp 2), save
// a checkpoint, and take a second step. Then they resume the checkpoint under
// layout B (tp 4) and take the same second step there. Both runs must end
// with the same parameters: the checkpoint carried the weights, Adam's
// moments and its step count across the change of plan.
//
//===----------------------------------------------------------------------===//

#include "StdlibFns.h"

#include "rlhf/runtime/Checkpoint.h"
#include "rlhf/runtime/Groups.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace rlhf;

int main() {
  return runGlooWorker([](Communicator &world) {
    const int rank = world.rank();
    const char *dir = std::getenv("RLHF_CHECKPOINT_DIR");
    ModelConfig cfg;
    cfg.shape = ModelShape{2, 64, 4, 4, 176, 512, false, false};
    ParamMap full = initParams(cfg, 9);
    const int64_t N = 8, S = 10;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(4);
    TrainBatch batch;
    batch.inputs = {at::randint(0, 512, {N, S}, gen, at::kLong)};
    batch.masks = {at::ones({N, S - 1})};
    FnProgram sft = testfns::stdlibFn("sft_loss");
    AdamSettings as;
    as.lr = 1e-2;

    Layout A{0, 2, 2, 1}, B{0, 1, 4, 1};
    ParallelGroups ga = makeGroups(world, A), gb = makeGroups(world, B);
    auto rowsOf = [&](int dpRank, int dp) {
      TrainBatch b;
      b.inputs = {batch.inputs[0].narrow(0, dpRank * N / dp, N / dp)};
      b.masks = {batch.masks[0].narrow(0, dpRank * N / dp, N / dp)};
      return b;
    };
    auto grad = [](ParamMap p) {
      for (auto &[n, t] : p)
        t = t.detach().clone().set_requires_grad(true);
      return p;
    };
    TrainOptions to;
    to.loss = &sft;
    to.dp = ga.dp.get();

    // Run A: step, save, step.
    LlamaModel a(cfg, grad(layoutShard(cfg, full, A, rank)),
                 {ga.tp.get(), ga.tpRank, 2});
    Adam optA(as);
    trainStep(a, optA, rowsOf(ga.dpRank, 2), to);
    saveCheckpoint(dir, cfg, a.params(), &optA, A, world, 1);
    trainStep(a, optA, rowsOf(ga.dpRank, 2), to);
    ParamMap endA;
    for (auto &[n, t] : a.params())
      endA[n] = t.detach();
    ParamMap aInB = reallocate(cfg, endA, A, B, world);

    // Run B: resume under tp 4, same second step.
    CheckpointState st = loadCheckpoint(dir, cfg, B, world);
    LlamaModel b(cfg, grad(st.params), {gb.tp.get(), gb.tpRank, 4});
    Adam optB(as);
    optB.restore(st.adamM, st.adamV, st.adamSteps);
    TrainOptions tb;
    tb.loss = &sft;
    trainStep(b, optB, batch, tb);
    double diff = 0;
    for (auto &[n, t] : b.params())
      diff =
          std::max(diff, (t.detach() - aInB.at(n)).abs().max().item<double>());
    std::printf("rank %d: resumed at step %ld (adam step %ld) under tp 4; max "
                "parameter diff to the uninterrupted tp 2 x dp 2 run %.3g\n",
                rank, long(st.step), long(st.adamSteps), diff);
    world.barrier();
    return st.step == 1 && st.adamSteps == 1 && diff < 2e-5 ? 0 : 1;
  });
}
