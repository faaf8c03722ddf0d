//===- CostModelBench.cpp - call estimates per second ---------------------===//
//
// The planner prices millions of (call, layout) candidates, so an estimate
// must cost well under a microsecond. Google Benchmark reports estimates per
// second on one core for each call kind, over a sweep of layouts.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/CostModel/CostModel.h"

#include <benchmark/benchmark.h>

#include <vector>

using namespace rlhfc::cost;

namespace {

Hardware h100() { return *knownHardware("H100_SXM"); }

std::vector<Strategy> layouts(int64_t gpus) {
  std::vector<Strategy> out;
  for (int64_t tp = 1; tp <= 8; tp *= 2)
    for (int64_t pp = 1; tp * pp <= gpus; pp *= 2)
      for (int64_t mbs : {1, 4, 16}) {
        Strategy s;
        s.tp = tp;
        s.pp = pp;
        s.dp = gpus / (tp * pp);
        s.microBatches = mbs;
        out.push_back(s);
      }
  return out;
}

void estimates(benchmark::State &state, CallKind kind) {
  rlhf::ModelShape m{80, 8192, 64, 8, 28672, 32000, false, false};
  Arch arch = Arch::get(m, 4096);
  Hardware hw = h100();
  std::vector<Strategy> ls = layouts(64);
  CallShape c;
  c.kind = kind;
  c.batch = 512;
  c.seqLen = 256;
  c.promptLen = 128;
  c.genLen = 128;
  c.minibatches = 4;
  size_t i = 0;
  for (auto _ : state) {
    Estimate e = estimateCall(arch, hw, ls[i++ % ls.size()], c);
    benchmark::DoNotOptimize(e);
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK_CAPTURE(estimates, generate, CallKind::Generate);
BENCHMARK_CAPTURE(estimates, inference, CallKind::Inference);
BENCHMARK_CAPTURE(estimates, train, CallKind::Train);

void realloc70b(benchmark::State &state) {
  rlhf::ModelShape m{80, 8192, 64, 8, 28672, 32000, false, false};
  Arch arch = Arch::get(m, 4096);
  Hardware hw = h100();
  Strategy from, to;
  from.dp = 2, from.tp = 8, from.pp = 4;
  to.dp = 8, to.tp = 4, to.pp = 2;
  for (auto _ : state)
    benchmark::DoNotOptimize(estimateRealloc(arch, hw, from, to));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(realloc70b)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
