//===- BaselinesTest.cpp - the symmetric heuristic's overflow rule ---------===//
//
// The heuristic with memory savers (the long-context baseline) lightens or
// deepens the heaviest model while the plan overflows. When that model can
// do neither, the next heaviest takes the turn: at 32K tokens on 128 GPUs
// the 70B actor's training had no lighter candidate at tp 8 and none with a
// deeper pipeline, and the heuristic gave up where lightening another
// model fitted (docs/benchmarks.md, long context).
//
//===----------------------------------------------------------------------===//

#include "TinyProblem.h"
#include "rlhfc/Planner/Planner.h"

#include <gtest/gtest.h>

using namespace rlhfc;
using namespace rlhfc::plan;

namespace {

/// A candidate on all four GPUs at (tp, pp 1), with the given time and
/// memory per GPU.
Candidate made(int64_t tp, double time, cost::Memory mem) {
  Candidate k;
  k.s.firstGpu = 0;
  k.s.tp = tp;
  k.s.dp = 4 / tp;
  k.devices = 4;
  k.time = time;
  k.mem = mem;
  return k;
}

/// A trained model whose one call has only tp 2, pp 1 (so it neither
/// lightens nor deepens) and weighs the most, and a frozen one whose
/// inference has a fast heavy and a slow light candidate there.
Problem stuckHeaviest() {
  Problem p = test::fourGpus(80e9);
  auto arch = cost::Arch::get(test::llamaShape(4, 1024, 8, 8, 2816), 1024);
  p.models = {{"actor", arch, true}, {"ref", arch, false}};
  test::addCall(p, 0, cost::CallKind::Train, {});
  test::addCall(p, 1, cost::CallKind::Inference, {});
  p.cands.assign(2, {});
  cost::Memory train;
  train.weights = 30e9;
  train.optimizer = 30e9;
  train.activations = 5e9;
  p.cands[0] = {made(2, 1.0, train)};
  cost::Memory heavy, light;
  heavy.weights = light.weights = 5e9;
  heavy.activations = 30e9;
  light.activations = 5e9;
  p.cands[1] = {made(2, 1.0, heavy), made(2, 2.0, light)};
  return p;
}

TEST(Heuristic, NextHeaviestModelLightensWhenTheHeaviestCannot) {
  Problem p = stuckHeaviest();
  // Resting 30 + 30 + 5 GB, and the reference's 30 GB of activations.
  Assignment fast = {0, 0};
  ASSERT_TRUE(simulate(p, fast).oom);
  SearchOptions o;
  o.heuristicSavers = true;
  std::optional<Assignment> a = solve(p, Method::Heuristic, o);
  ASSERT_TRUE(a.has_value()) << "the reference model could lighten";
  EXPECT_EQ((*a)[1], 1);
  EXPECT_FALSE(simulate(p, *a).oom);
  // ReaLHF's rule as published deepens the heaviest model only.
  EXPECT_FALSE(solve(p, Method::Heuristic).has_value());
}

} // namespace
