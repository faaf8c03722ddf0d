//===- Bounds.cpp - schedule-independent bounds on the iteration time -----===//
//
// Two quantities no schedule can beat, in steady state:
//  - every GPU executes its calls and reallocations once per iteration, so
//    the period is at least the busiest GPU's work;
//  - a model's first call of iteration k+1 waits for its last call of
//    iteration k, and that call waits on its dependency chain: the period is
//    at least the longest such chain (a cycle of the max-plus recurrence the
//    simulator evaluates).
// The simulator takes them as floors of its three-iteration estimate, and the
// exact search uses them, with unassigned calls at their fastest, as an
// admissible bound.
//
//===----------------------------------------------------------------------===//

#include "Cycle.h"

#include <algorithm>

using namespace rlhfc;
using namespace rlhfc::plan;

namespace {

bool sameLayout(const cost::Strategy &a, const cost::Strategy &b) {
  return a.firstGpu == b.firstGpu && a.dp == b.dp && a.tp == b.tp &&
         a.pp == b.pp;
}

} // namespace

IterationBounds plan::iterationBounds(const Problem &p, const Assignment &a) {
  IterationBounds b;
  const size_t n = p.calls.size();
  auto known = [&](size_t c) { return !p.calls[c].host && a[c] >= 0; };
  auto cand = [&](size_t c) -> const Candidate & { return p.cands[c][a[c]]; };
  auto timeOf = [&](size_t c) {
    return p.calls[c].host ? 0.0 : known(c) ? cand(c).time : p.fastestTime(c);
  };

  ModelCalls mc(p);
  // Reallocation into `c`, when both layouts are known (0 otherwise: a bound).
  auto reallocInto = [&](size_t c) {
    int q = mc.prev[c];
    if (!known(c) || q < 0 || !known(size_t(q)) ||
        sameLayout(cand(q).s, cand(c).s))
      return 0.0;
    return p.reallocTime(p.calls[c].model, cand(q).s, cand(c).s);
  };

  // Busiest GPU and total GPU-seconds.
  std::vector<double> work(p.gpus, 0.0);
  double area = 0;
  for (size_t c = 0; c < n; ++c) {
    if (p.calls[c].host)
      continue;
    if (!known(c)) {
      area += p.leastArea(c);
      continue;
    }
    const Candidate &k = cand(c);
    for (int64_t g = k.s.firstGpu; g < k.s.firstGpu + k.devices; ++g)
      work[g] += k.time;
    area += k.time * double(k.devices);
    if (double rt = reallocInto(c); rt > 0) {
      const Candidate &f = cand(size_t(mc.prev[c]));
      int64_t lo = std::min(f.s.firstGpu, k.s.firstGpu);
      int64_t hi = std::max(f.s.firstGpu + f.devices, k.s.firstGpu + k.devices);
      for (int64_t g = lo; g < hi; ++g)
        work[g] += rt;
      area += rt * double(hi - lo);
    }
  }
  for (double w : work)
    b.busiestGpu = std::max(b.busiestGpu, w);
  b.area = area / double(std::max<int64_t>(1, p.gpus));

  // Longest chain from each model's first call to its last, with transfers
  // between known meshes and reallocations between known layouts.
  std::vector<double> dist;
  b.cycle = longestCycle(
      p, mc, dist, timeOf,
      [&](size_t d, size_t c, double bytes) {
        return known(c) && known(d)
                   ? cost::estimateTransfer(bytes, p.hw, cand(d).s, cand(c).s)
                         .time
                   : 0.0;
      },
      reallocInto);
  return b;
}

double plan::memoryLowerBound(const Problem &p, const Assignment &a,
                              int64_t *gpu) {
  const size_t n = p.calls.size();
  auto known = [&](size_t c) { return !p.calls[c].host && a[c] >= 0; };
  std::vector<double> resident(p.gpus, 0.0), working(p.gpus, 0.0);
  // A model's weights rest in the layout of its last call, once that is known
  // (or in host memory, offloaded: then its call holds them while it runs).
  std::vector<int> lastOf(p.models.size(), -1);
  for (size_t c = 0; c < n; ++c)
    if (!p.calls[c].host)
      lastOf[p.calls[c].model] = int(c);
  for (int c : lastOf)
    if (c >= 0 && known(size_t(c)) && !p.cands[c][a[c]].s.offload) {
      const Candidate &k = p.cands[c][a[c]];
      for (int64_t g = k.s.firstGpu; g < k.s.firstGpu + k.devices; ++g)
        resident[g] += k.mem.weights;
    }
  for (size_t c = 0; c < n; ++c) {
    if (!known(c))
      continue;
    const Candidate &k = p.cands[c][a[c]];
    for (int64_t g = k.s.firstGpu; g < k.s.firstGpu + k.devices; ++g) {
      if (p.calls[c].shape.kind == cost::CallKind::Train)
        resident[g] += k.mem.grads + k.mem.optimizer;
      working[g] =
          std::max(working[g], k.mem.activations + k.mem.kvCache +
                                   (k.s.offload ? k.mem.weights : 0.0));
    }
  }
  double worst = 0;
  for (int64_t g = 0; g < p.gpus; ++g)
    if (resident[g] + working[g] > worst) {
      worst = resident[g] + working[g];
      if (gpu)
        *gpu = g;
    }
  return worst;
}
