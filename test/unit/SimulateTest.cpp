//===- SimulateTest.cpp - what the simulator lets overlap -----------------===//
//
// A reallocation occupies the GPUs of both layouts and no others: the
// runtime moves slices point to point, so a call on GPUs between two
// disjoint meshes runs while the parameters move past it. Gradients live
// only in their train call, as the runtime's fp32 accumulators do. The
// simulators keep GPU times and memory per run of GPUs, not per GPU; both
// agree with a GPU-by-GPU reference. An ema holds both models' meshes
// after the calls before it.
//
//===----------------------------------------------------------------------===//

#include "SimulateImpl.h"
#include "TinyProblem.h"
#include "rlhfc/Planner/Planner.h"

#include "llvm/ADT/STLExtras.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>

using namespace rlhfc;
using namespace rlhfc::plan;

namespace {

int candidateOn(const Problem &p, size_t call, int64_t first, int64_t devices) {
  for (size_t i = 0; i < p.cands[call].size(); ++i) {
    const Candidate &k = p.cands[call][i];
    if (k.s.firstGpu == first && k.devices == devices && !k.s.offload)
      return int(i);
  }
  return -1;
}

TEST(Simulate, ReallocationSkipsTheGpusBetweenDisjointMeshes) {
  Problem p = test::fourGpus(1e12);
  auto arch = cost::Arch::get(test::llamaShape(8, 4096, 32, 32, 11008), 4096);
  p.models.push_back({"actor", arch, true});
  p.models.push_back({"critic", arch, true});
  const double rows = 64 * 256 * 4.0;
  // 0 generate @actor on GPU 3, 1 train @actor on GPU 0, 2 train @critic
  // on GPU 1, independent of the actor.
  test::addCall(p, 0, cost::CallKind::Generate, {});
  test::addCall(p, 0, cost::CallKind::Train, {{0, rows}});
  test::addCall(p, 1, cost::CallKind::Train, {});
  test::addCandidates(p);
  Assignment a = {candidateOn(p, 0, 3, 1), candidateOn(p, 1, 0, 1),
                  candidateOn(p, 2, 1, 1)};
  ASSERT_TRUE(llvm::all_of(a, [](int i) { return i >= 0; }));

  SimResult r = simulate(p, a, 3, true);
  int reallocs = 0;
  for (const Event &e : r.events) {
    if (e.kind != Event::Realloc)
      continue;
    ++reallocs;
    EXPECT_EQ(e.devices, 1);
    EXPECT_TRUE(e.firstGpu == 0 || e.firstGpu == 3) << e.firstGpu;
  }
  // Into generation and back into training, every iteration, one event per
  // mesh.
  EXPECT_EQ(reallocs, 2 * 2 * 3);

  // The critic's training never waits: back to back on GPU 1.
  double criticEnd = 0;
  for (const Event &e : r.events)
    if (e.kind == Event::Call && e.call == 2) {
      EXPECT_NEAR(e.start, criticEnd, 1e-9);
      criticEnd = e.end;
    }
}

// Dynamic sampling repeats a generate and an inference of one model in
// two layouts: the move between them is made every round and undone before
// each further one (2 x rounds - 1 moves); the move into the generate's
// layout, before the loop, is made once.
TEST(Simulate, RepeatedCallsMoveTheirModelEveryRound) {
  auto moves = [](double rounds) {
    Problem p = test::fourGpus(1e12);
    auto arch = cost::Arch::get(test::llamaShape(8, 4096, 32, 32, 11008), 4096);
    p.models.push_back({"actor", arch, true});
    const double rows = 64 * 256 * 4.0;
    test::addCall(p, 0, cost::CallKind::Generate, {});
    test::addCall(p, 0, cost::CallKind::Inference, {{0, rows}});
    test::addCall(p, 0, cost::CallKind::Train, {{1, rows}});
    p.calls[0].shape.repeats = p.calls[1].shape.repeats = rounds;
    test::addCandidates(p);
    Assignment a = {candidateOn(p, 0, 3, 1), candidateOn(p, 1, 0, 1),
                    candidateOn(p, 2, 0, 1)};
    EXPECT_TRUE(llvm::all_of(a, [](int i) { return i >= 0; }));
    std::array<double, 2> took = {0, 0}; // into the generate, the inference
    for (const Event &e : simulate(p, a, 2, true).events)
      if (e.kind == Event::Realloc && e.iteration == 1 && e.call < 2)
        took[size_t(e.call)] += e.end - e.start;
    return took;
  };
  auto once = moves(1), thrice = moves(2);
  ASSERT_GT(once[0], 0);
  ASSERT_GT(once[1], 0);
  EXPECT_NEAR(thrice[0], once[0], 1e-12);
  EXPECT_NEAR(thrice[1], 3 * once[1], 1e-12);
}

TEST(Simulate, GradientsLiveOnlyInTheirTrainCall) {
  Problem p = test::fourGpus(1e12);
  auto arch = cost::Arch::get(test::llamaShape(8, 4096, 32, 32, 11008), 4096);
  p.models.push_back({"actor", arch, true});
  p.models.push_back({"critic", arch, true});
  // Two train calls one after the other on GPU 0.
  test::addCall(p, 0, cost::CallKind::Train, {});
  test::addCall(p, 1, cost::CallKind::Train, {});
  test::addCandidates(p);
  Assignment a = {candidateOn(p, 0, 0, 1), candidateOn(p, 1, 0, 1)};
  ASSERT_TRUE(llvm::all_of(a, [](int i) { return i >= 0; }));
  const cost::Memory &x = p.cands[0][a[0]].mem, &y = p.cands[1][a[1]].mem;
  ASSERT_GT(x.grads, 0);
  ASSERT_GT(y.grads, 0);

  // Both models' weights and optimizer state stay; one call's gradients,
  // activations and KV cache at a time.
  SimResult r = simulate(p, a, 2, true);
  double expected = x.weights + y.weights + x.optimizer + y.optimizer +
                    std::max(x.working(), y.working());
  EXPECT_NEAR(r.peakMemory[0], expected, 1e-6 * expected);
  EXPECT_LT(r.peakMemory[0], expected + std::min(x.grads, y.grads));
  // The search's bound agrees where nothing is reallocated.
  EXPECT_NEAR(memoryLowerBound(p, a), expected, 1e-6 * expected);
  // Between the calls GPU 0 holds no gradients.
  double least = r.peakMemory[0];
  for (auto &[t, bytes] : r.memoryTrace[0])
    least = std::min(least, bytes);
  EXPECT_NEAR(least, x.weights + y.weights + x.optimizer + y.optimizer,
              1e-6 * expected);
}

TEST(Simulate, EmaWaitsForBothModelsAndHoldsBothMeshes) {
  Problem p = test::fourGpus(1e12);
  auto arch = cost::Arch::get(test::llamaShape(8, 4096, 32, 32, 11008), 4096);
  p.models.push_back({"actor", arch, true});
  p.models.push_back({"ref", arch, false});
  // 0 inference @ref on GPU 3, 1 train @actor on GPUs 0-1, then
  // ref.ema(actor): the next iteration's inference waits for it.
  test::addCall(p, 1, cost::CallKind::Inference, {});
  test::addCall(p, 0, cost::CallKind::Train, {});
  test::addCandidates(p);
  Assignment a = {candidateOn(p, 0, 3, 1), candidateOn(p, 1, 0, 2)};
  ASSERT_TRUE(llvm::all_of(a, [](int i) { return i >= 0; }));
  const SimResult without = simulate(p, a, 3, true);
  p.parked.resize(2);
  p.averages.push_back({nullptr, 1, 0, 2, "ema @ref from @actor"});
  const SimResult with = simulate(p, a, 3, true);

  const Candidate &ref = p.cands[0][a[0]], &actor = p.cands[1][a[1]];
  const double expected =
      p.reallocTime(0, actor.s, ref.s) +
      cost::emaUpdateTime(arch, p.hw, ref.s, ref.mem.weights);
  ASSERT_GT(expected, 0);
  std::vector<double> trainEnd(3), emaEnd(3, -1), refStart(3);
  int emas = 0;
  for (const Event &e : with.events) {
    if (e.kind == Event::Call && e.call == 1)
      trainEnd[e.iteration] = e.end;
    if (e.kind == Event::Call && e.call == 0)
      refStart[e.iteration] = e.start;
    if (e.kind != Event::Average)
      continue;
    ++emas;
    // One event per mesh, the two disjoint meshes and nothing between.
    EXPECT_TRUE((e.firstGpu == 0 && e.devices == 2) ||
                (e.firstGpu == 3 && e.devices == 1))
        << e.firstGpu << " " << e.devices;
    EXPECT_NEAR(e.end - e.start, expected, 1e-12);
    emaEnd[e.iteration] = e.end;
  }
  EXPECT_EQ(emas, 2 * 3);
  for (int it = 0; it < 3; ++it) {
    EXPECT_GE(emaEnd[it] - expected, trainEnd[it] - 1e-12) << it;
    if (it + 1 < 3) {
      EXPECT_GE(refStart[it + 1], emaEnd[it] - 1e-12) << it;
    }
  }
  EXPECT_GT(with.makespan, without.makespan + expected - 1e-12);
  // The target keeps fp32 master weights beside its bf16 ones; while the
  // ema runs, the source's weights arrive beside them.
  const double added = with.peakMemory[3] - without.peakMemory[3];
  EXPECT_EQ(with.peakMemory[2], without.peakMemory[2]);
  EXPECT_GE(added, 2 * ref.mem.weights * (1 - 1e-9));
  EXPECT_LE(added, 3 * ref.mem.weights * (1 + 1e-9));
  // The search's memory bound stays a bound.
  EXPECT_LE(memoryLowerBound(p, a),
            *std::max_element(with.peakMemory.begin(), with.peakMemory.end()));
}

TEST(Simulate, GpuTimelineAgreesWithOneTimePerGpu) {
  // Random runs on 128 GPUs, as calls and moves occupy them, against a time
  // per GPU.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t gpus = 128;
    detail::GpuTimeline runs(gpus);
    std::vector<double> busy(gpus, 0.0);
    for (int op = 0; op < 40; ++op) {
      int64_t first = int64_t(rng() % gpus);
      int64_t count = int64_t(rng() % (gpus - first + 1));
      double expect = 0;
      for (int64_t g = first; g < first + count; ++g)
        expect = std::max(expect, busy[g]);
      ASSERT_EQ(runs.busyUntil(first, count), expect)
          << "trial " << trial << " op " << op;
      double until = expect + double(rng() % 100) / 10;
      runs.occupy(first, count, until);
      for (int64_t g = first; g < first + count; ++g)
        busy[g] = until;
    }
    for (int64_t g = 0; g < gpus; ++g)
      ASSERT_EQ(runs.busyUntil(g, 1), busy[g]) << "GPU " << g;
  }
}

TEST(Simulate, GpuRunsSumPerRunAsPerGpu) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t gpus = 64;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (int r = 0; r < 6; ++r) {
      int64_t first = int64_t(rng() % gpus);
      ranges.push_back({first, int64_t(rng() % (gpus - first + 1))});
    }
    detail::GpuRuns runs(gpus);
    for (auto [first, count] : ranges)
      runs.cut(first, count);
    runs.seal();
    std::vector<double> perRun(runs.size(), 0.0), perGpu(gpus, 0.0);
    for (size_t r = 0; r < ranges.size(); ++r) {
      auto [first, count] = ranges[r];
      runs.each(first, count, [&](size_t i) { perRun[i] += double(r + 1); });
      for (int64_t g = first; g < first + count; ++g)
        perGpu[g] += double(r + 1);
    }
    EXPECT_EQ(runs.perGpu(perRun), perGpu) << "trial " << trial;
  }
}

} // namespace
