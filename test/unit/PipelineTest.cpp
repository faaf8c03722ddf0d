//===- PipelineTest.cpp - the 1F1B schedule, simulated --------------------===//
//
// The schedules runPipeline executes, checked without processes: every
// micro-batch once each way and in order, the activations a stage holds,
// and, simulating the exchanges (a message moves once both stages have
// posted it; each forward and backward takes one unit), that no order
// deadlocks and that 1F1B takes M + P - 1 slots each way where the
// sequential order takes M x P.
//
//===----------------------------------------------------------------------===//

#include "Pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

using namespace rlhf;

namespace {

using Schedule = std::vector<PipeStep> (*)(int, int, int64_t);

/// The time every stage finishes, or nullopt on a deadlock.
std::optional<double> simulate(Schedule schedule, int P, int64_t M) {
  struct Stage {
    std::vector<PipeStep> steps;
    std::vector<PipeExchange> plan;
    size_t at = 0;     ///< the exchange it waits on (before step `at`)
    double posted = 0; ///< when it posted that exchange
  };
  std::vector<Stage> st(static_cast<size_t>(P));
  for (int s = 0; s < P; ++s) {
    st[size_t(s)].steps = schedule(s, P, M);
    st[size_t(s)].plan = pipeExchanges(st[size_t(s)].steps, s, P);
  }
  auto key = [](const PipeMessage &m) {
    return std::make_tuple(int(m.kind), m.micro, m.from, m.to);
  };
  std::map<std::tuple<int, int64_t, int, int>, double> moved; // when
  auto lists = [](const PipeExchange &x, const PipeMessage &m) {
    return std::find(x.sends.begin(), x.sends.end(), m) != x.sends.end() ||
           std::find(x.recvs.begin(), x.recvs.end(), m) != x.recvs.end();
  };
  double end = 0;
  for (bool progress = true; progress;) {
    progress = false;
    // A message moves once both of its stages have posted it.
    for (int s = 0; s < P; ++s) {
      const Stage &x = st[size_t(s)];
      if (x.at == x.plan.size())
        continue;
      const PipeExchange &e = x.plan[x.at];
      for (const auto *list : {&e.sends, &e.recvs})
        for (const PipeMessage &m : *list) {
          const Stage &peer = st[size_t(m.from == s ? m.to : m.from)];
          if (!moved.count(key(m)) && peer.at < peer.plan.size() &&
              lists(peer.plan[peer.at], m))
            moved[key(m)] = std::max(x.posted, peer.posted);
        }
    }
    // An exchange completes when all of its messages have moved; the step
    // after it takes one unit.
    for (Stage &x : st) {
      if (x.at == x.plan.size())
        continue;
      const PipeExchange &e = x.plan[x.at];
      double done = x.posted;
      bool all = true;
      for (const auto *list : {&e.sends, &e.recvs})
        for (const PipeMessage &m : *list) {
          auto it = moved.find(key(m));
          all = all && it != moved.end();
          if (it != moved.end())
            done = std::max(done, it->second);
        }
      if (!all)
        continue;
      x.posted = done + (x.at < x.steps.size() ? 1.0 : 0.0);
      end = std::max(end, x.posted);
      ++x.at;
      progress = true;
    }
  }
  for (const Stage &x : st)
    if (x.at < x.plan.size())
      return std::nullopt;
  return end;
}

/// An order that deadlocks: stage 0 waits for micro-batch 0's gradient
/// before sending its activation, which stage 1 waits for.
std::vector<PipeStep> crossed(int stage, int stages, int64_t micro) {
  std::vector<PipeStep> steps = sequentialSchedule(stage, stages, micro);
  if (stage == 0)
    std::swap(steps[0], steps[1]);
  return steps;
}

TEST(Pipeline, TheSimulationFindsADeadlock) {
  EXPECT_FALSE(simulate(&crossed, 2, 1));
  EXPECT_TRUE(simulate(&sequentialSchedule, 2, 1));
}

TEST(Pipeline, EveryMicroBatchOnceEachWayInOrder) {
  for (Schedule schedule : {&oneFOneB, &sequentialSchedule})
    for (int P = 1; P <= 8; ++P)
      for (int64_t M = 1; M <= 12; ++M)
        for (int s = 0; s < P; ++s) {
          std::vector<PipeStep> steps = schedule(s, P, M);
          std::vector<PipeExchange> x = pipeExchanges(steps, s, P);
          int64_t nextF = 0, nextB = 0, held = 0, most = 0;
          for (size_t i = 0; i < steps.size(); ++i) {
            const PipeStep &st = steps[i];
            if (st.kind == PipeStep::Forward) {
              EXPECT_EQ(st.micro, nextF++);
              most = std::max(most, ++held);
            } else {
              EXPECT_EQ(st.micro, nextB++);
              EXPECT_LT(st.micro, nextF) << "backward before its forward";
              --held;
            }
            // A forward receives its input unless first and its output
            // goes on with the next exchange unless last; a backward
            // receives its gradient unless last and sends one back unless
            // first.
            const bool fwd = st.kind == PipeStep::Forward;
            const auto kind =
                fwd ? PipeMessage::Activation : PipeMessage::Gradient;
            EXPECT_EQ(x[i].recvs.size(), fwd ? s > 0 : s < P - 1);
            for (const PipeMessage &m : x[i].recvs)
              EXPECT_EQ(m.kind, kind);
            EXPECT_EQ(x[i + 1].sends.size(), fwd ? s < P - 1 : s > 0);
            for (const PipeMessage &m : x[i + 1].sends)
              EXPECT_TRUE(m.kind == kind && m.micro == st.micro);
          }
          EXPECT_EQ(nextF, M);
          EXPECT_EQ(nextB, M);
          // 1F1B holds P - s micro-batches on stage s (what the cost model
          // charges stage 0); the sequential order one.
          EXPECT_EQ(most,
                    schedule == &oneFOneB ? std::min<int64_t>(P - s, M) : 1)
              << "P " << P << " M " << M << " stage " << s;
        }
}

TEST(Pipeline, NoDeadlockAndOneFOneBOverlapsTheStages) {
  for (int P = 1; P <= 8; ++P)
    for (int64_t M = 1; M <= 12; ++M) {
      std::optional<double> f = simulate(&oneFOneB, P, M),
                            q = simulate(&sequentialSchedule, P, M);
      ASSERT_TRUE(f) << "1F1B deadlocks at P " << P << " M " << M;
      ASSERT_TRUE(q) << "the sequential order deadlocks at P " << P << " M "
                     << M;
      // Unit steps: 1F1B fills M + P - 1 slots each way (the cost model's
      // count); one stage at a time takes M x P.
      EXPECT_EQ(*f, 2.0 * double(M + P - 1)) << "P " << P << " M " << M;
      EXPECT_EQ(*q, 2.0 * double(M * P)) << "P " << P << " M " << M;
    }
}

} // namespace
