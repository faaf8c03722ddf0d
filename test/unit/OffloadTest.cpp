//===- OffloadTest.cpp - frozen models resting in host memory -------------===//
//
// An offloaded call's model holds no weights on its GPUs between calls; the
// call pays the copy from host memory first. The simulator shows both, the
// memory bound stays admissible, and when only offloading fits, the exact
// search finds the brute-force optimum, which offloads. Under staleness the
// search offloads where that makes a faster plan fit.
//
//===----------------------------------------------------------------------===//

#include "TinyProblem.h"
#include "rlhfc/Planner/Planner.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"

#include <gtest/gtest.h>

using namespace rlhfc;
using namespace rlhfc::plan;

namespace {

/// A trained actor (generate, train) and a frozen reference (inference) on
/// one node of four H100s; every call may take any aligned mesh and tp, and
/// the reference also every one of those offloaded.
Problem problem(double memoryLimit) {
  Problem p = test::fourGpus(memoryLimit);
  cost::Arch arch =
      cost::Arch::get(test::llamaShape(32, 4096, 32, 32, 11008), 4096);
  p.models.push_back({"actor", arch, true});
  p.models.push_back({"ref", arch, false, /*offloadable=*/true});
  const double rows = 64 * 256 * 4.0;
  test::addCall(p, 0, cost::CallKind::Generate, {});
  test::addCall(p, 1, cost::CallKind::Inference, {{0, rows}});
  test::addCall(p, 0, cost::CallKind::Train, {{0, rows}, {1, rows}});
  test::addCandidates(p);
  return p;
}

/// The candidate of `call` on all four GPUs with tp 4, offloaded or not.
int wholeNode(const Problem &p, size_t call, bool offload) {
  for (int k = 0; k < int(p.cands[call].size()); ++k) {
    const cost::Strategy &s = p.cands[call][k].s;
    if (s.firstGpu == 0 && s.tp == 4 && s.dp == 1 && s.offload == offload)
      return k;
  }
  return -1;
}

template <typename F> void forEach(const Problem &p, F f) {
  Assignment a(p.calls.size(), 0);
  for (a[0] = 0; a[0] < int(p.cands[0].size()); ++a[0])
    for (a[1] = 0; a[1] < int(p.cands[1].size()); ++a[1])
      for (a[2] = 0; a[2] < int(p.cands[2].size()); ++a[2])
        f(a);
}

TEST(Offload, FreesTheRestingWeightsAndPaysTheLoad) {
  Problem p = problem(1e12);
  Assignment resident = {wholeNode(p, 0, false), wholeNode(p, 1, false),
                         wholeNode(p, 2, false)};
  Assignment offloaded = resident;
  offloaded[1] = wholeNode(p, 1, true);
  ASSERT_GE(offloaded[1], 0);
  SimResult r = simulate(p, resident, 3, true);
  SimResult o = simulate(p, offloaded, 3, true);
  const Candidate &ref = p.cands[1][offloaded[1]];
  double load = cost::hostLoadTime(ref.mem.weights, p.hw);
  EXPECT_GT(load, 0.0);
  // The training working set dominates every GPU, so the peak drops by
  // exactly the reference's shard.
  for (int64_t g = 0; g < p.gpus; ++g)
    EXPECT_NEAR(r.peakMemory[g] - o.peakMemory[g], ref.mem.weights, 1.0);
  EXPECT_NEAR(o.iterationTime - r.iterationTime, load, 1e-9);
  // The load opens the call's span on its GPUs, in every iteration.
  int loads = 0;
  for (size_t i = 0; i < o.events.size(); ++i) {
    const Event &e = o.events[i];
    if (e.kind != Event::Load)
      continue;
    ++loads;
    EXPECT_EQ(e.call, 1);
    EXPECT_NEAR(e.end - e.start, load, 1e-12);
    EXPECT_DOUBLE_EQ(e.bytes, ref.mem.weights * 4);
    ASSERT_LT(i + 1, o.events.size());
    EXPECT_EQ(o.events[i + 1].kind, Event::Call);
    EXPECT_DOUBLE_EQ(o.events[i + 1].start, e.end);
  }
  EXPECT_EQ(loads, 3);
  for (const Event &e : r.events)
    EXPECT_NE(e.kind, Event::Load);
}

TEST(Offload, MemoryBoundIsAdmissible) {
  Problem p = problem(1e12);
  forEach(p, [&](const Assignment &a) {
    SimResult r = simulate(p, a);
    double peak = *std::max_element(r.peakMemory.begin(), r.peakMemory.end());
    ASSERT_LE(memoryLowerBound(p, a), peak * (1 + 1e-12));
  });
}

TEST(Offload, ExactSearchOffloadsWhenOnlyThatFits) {
  // The smallest peak with the reference resident, and with it offloaded.
  Problem probe = problem(1e12);
  double residentPeak = kInfTime, offloadPeak = kInfTime;
  forEach(probe, [&](const Assignment &a) {
    SimResult r = simulate(probe, a);
    double peak = *std::max_element(r.peakMemory.begin(), r.peakMemory.end());
    double &best = probe.cands[1][a[1]].s.offload ? offloadPeak : residentPeak;
    best = std::min(best, peak);
  });
  ASSERT_LT(offloadPeak, residentPeak);
  Problem p = problem((offloadPeak + residentPeak) / 2);
  double bruteBest = kInfTime;
  forEach(p, [&](const Assignment &a) {
    SimResult r = simulate(p, a);
    if (!r.oom)
      bruteBest = std::min(bruteBest, r.iterationTime);
  });
  ASSERT_LT(bruteBest, kInfTime);
  ExactStats st;
  std::optional<Assignment> a = exactSearch(p, {}, st);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(st.proven);
  EXPECT_TRUE(p.cands[1][(*a)[1]].s.offload);
  EXPECT_NEAR(simulate(p, *a).iterationTime, bruteBest, 1e-9);
  // The annealing search gets there too, starting from nothing that fits.
  SearchStats ss;
  std::optional<Assignment> s = solve(p, Method::Search, {}, &ss);
  ASSERT_TRUE(s.has_value());
  EXPECT_NEAR(simulate(p, *s).iterationTime, bruteBest, 1e-9);
}

TEST(Offload, AsyncSearchOffloadsWhereThatMakesAFasterPlanFit) {
  // PPO on 8 GPUs under staleness 1 at 896 new tokens, 48 GB per GPU: the
  // generator keeps its own copy of the actor, and the plans that split the
  // node fit only with a frozen model's weights in host memory.
  Problem p = test::ppoOnOneNode(8, 896, 2, 24, 16, /*offloadFrozen=*/true);
  p.memoryLimit = 48e9;
  std::vector<std::vector<int>> from;
  Problem resident = p.restricted(
      [](size_t, const Candidate &k) { return !k.s.offload; }, from);
  SearchOptions o;
  o.budget = 2000;
  SearchStats with, without;
  std::optional<Assignment> a = solve(p, Method::Search, o, &with);
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(solve(resident, Method::Search, o, &without).has_value());
  EXPECT_LT(with.bestTime, 0.99 * without.bestTime);
  EXPECT_TRUE(llvm::any_of(llvm::seq(p.calls.size()), [&](size_t c) {
    return (*a)[c] >= 0 && p.cands[c][(*a)[c]].s.offload;
  }));
  EXPECT_FALSE(simulate(p, *a).oom);
}

} // namespace
