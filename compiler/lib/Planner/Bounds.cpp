//===- Bounds.cpp - schedule-independent bounds on the iteration time -----===//
//
// Two quantities no schedule can beat, in steady state:
//  - every GPU executes its calls and reallocations once per iteration, so
//    the period is at least the busiest GPU's work;
//  - a model's first call of iteration k+1 waits for its last call of
//    iteration k, and that call waits on its dependency chain: the period is
//    at least the longest such chain (a cycle of the max-plus recurrence the
//    simulator evaluates);
//  - two calls where one depends on the other within an iteration and the
//    other's next instance on the one never overlap. While one of a set of
//    such calls runs, so do none of the calls that overlap none of them:
//    the period is at least the set's times plus those calls' GPU-seconds
//    spread over the whole cluster. (In PPO: generation and actor training
//    run alone, whatever their meshes, and the inferences between them fill
//    the cluster at best.)
// The simulator takes them as floors of its three-iteration estimate, and the
// exact search uses them, with unassigned calls at their fastest, as an
// admissible bound.
//
//===----------------------------------------------------------------------===//

#include "Cycle.h"
#include "SimulateImpl.h"

#include "llvm/ADT/BitVector.h"

#include <algorithm>
#include <functional>

using namespace rlhfc;
using namespace rlhfc::plan;

const std::vector<Problem::Window> &Problem::windows() const {
  if (windowCache)
    return *windowCache;
  const size_t n = calls.size();
  ModelCalls mc(*this);
  // before[c]: calls that finish before c starts within an iteration, over
  // data and same-model edges (host calls included).
  std::vector<llvm::BitVector> before(n, llvm::BitVector(n));
  for (size_t c = 0; c < n; ++c) {
    auto from = [&](size_t d) {
      if (d < c) {
        before[c] |= before[d];
        before[c].set(d);
      }
    };
    for (auto [d, bytes] : calls[c].deps)
      from(size_t(d));
    if (!calls[c].host && mc.prev[c] >= 0)
      from(size_t(mc.prev[c]));
  }
  auto reaches = [&](size_t a, size_t b) { return a == b || before[b][a]; };
  // a of iteration k precedes b of iteration k+1: through some model's last
  // call and that model's first call of the next iteration.
  auto reachesNext = [&](size_t a, size_t b) {
    return llvm::any_of(mc.of, [&](const std::vector<size_t> &cs) {
      return !cs.empty() && reaches(a, cs.back()) && reaches(cs.front(), b);
    });
  };
  std::vector<size_t> real;
  for (size_t c = 0; c < n; ++c)
    if (!calls[c].host && !cands[c].empty())
      real.push_back(c);
  std::vector<llvm::BitVector> apart(n, llvm::BitVector(n));
  for (size_t x : real)
    for (size_t y : real)
      if (x != y && ((reaches(x, y) && reachesNext(y, x)) ||
                     (reaches(y, x) && reachesNext(x, y))))
        apart[x].set(y);

  // Every clique of the never-overlap relation, up to a cap that keeps the
  // bound cheap (each entry is a valid bound on its own).
  constexpr size_t kMaxWindows = 256;
  std::vector<Window> out;
  std::vector<size_t> serial;
  std::function<void(size_t, const llvm::BitVector &)> grow =
      [&](size_t from, const llvm::BitVector &common) {
        for (size_t i = from; i < real.size() && out.size() < kMaxWindows;
             ++i) {
          size_t x = real[i];
          if (!serial.empty() && !common[x])
            continue;
          llvm::BitVector next = serial.empty() ? apart[x] : common;
          if (!serial.empty())
            next &= apart[x];
          serial.push_back(x);
          Window w{serial, {}};
          for (size_t c : next.set_bits())
            w.apart.push_back(c);
          // A lone call with nothing apart is already in its model's cycle.
          if (serial.size() > 1 || !w.apart.empty())
            out.push_back(std::move(w));
          grow(i + 1, next);
          serial.pop_back();
        }
      };
  grow(0, llvm::BitVector(n));
  windowCache = std::move(out);
  return *windowCache;
}

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
        cost::sameLayout(cand(q).s, cand(c).s))
      return 0.0;
    return p.reallocTime(p.calls[c].model, cand(q).s, cand(c).s);
  };

  // Under staleness a generate may overlap its model's training, so the
  // chains and windows below, which assume it waits for it, do not bound the
  // period; nor do reallocations, which a generator with its own copy of the
  // weights skips. Only the calls' own work per GPU and in all is left.
  const bool ahead =
      p.staleness > 0 &&
      llvm::any_of(p.calls, [](const Call &c) { return c.stale > 0; });
  // Busiest GPU and total GPU-seconds.
  std::vector<double> rts(n, 0.0);
  std::vector<ReallocSpan> spans(n);
  detail::GpuRuns runs(p.gpus);
  for (size_t c = 0; c < n; ++c) {
    if (!known(c))
      continue;
    runs.cut(cand(c).s.firstGpu, cand(c).devices);
    if ((rts[c] = ahead ? 0.0 : reallocInto(c)) > 0) {
      spans[c] = reallocSpan(cand(size_t(mc.prev[c])), cand(c));
      for (auto [first, count] : spans[c].ranges)
        runs.cut(first, count);
    }
  }
  runs.seal();
  std::vector<double> work(runs.size(), 0.0);
  double area = 0;
  for (size_t c = 0; c < n; ++c) {
    if (p.calls[c].host)
      continue;
    if (!known(c)) {
      area += p.leastArea(c);
      continue;
    }
    const Candidate &k = cand(c);
    runs.each(k.s.firstGpu, k.devices, [&](size_t i) { work[i] += k.time; });
    area += k.time * double(k.devices);
    if (rts[c] > 0) {
      for (auto [first, count] : spans[c].ranges)
        runs.each(first, count, [&](size_t i) { work[i] += rts[c]; });
      area += rts[c] * double(spans[c].devices());
    }
  }
  for (double w : work)
    b.busiestGpu = std::max(b.busiestGpu, w);
  b.area = area / double(std::max<int64_t>(1, p.gpus));
  if (ahead)
    return b;

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

  const double gpus = double(std::max<int64_t>(1, p.gpus));
  b.window = longestWindow(p, timeOf, [&](size_t c) {
    return (known(c) ? cand(c).time * double(cand(c).devices)
                     : p.leastArea(c)) /
           gpus;
  });
  return b;
}

double plan::memoryLowerBound(const Problem &p, const Assignment &a,
                              int64_t *gpu) {
  const size_t n = p.calls.size();
  auto known = [&](size_t c) { return !p.calls[c].host && a[c] >= 0; };
  // A model's weights rest in the layout of its last call, once that is known
  // (or in host memory, offloaded: then its call holds them while it runs).
  std::vector<int> lastOf(p.models.size(), -1);
  for (size_t c = 0; c < n; ++c)
    if (!p.calls[c].host)
      lastOf[p.calls[c].model] = int(c);
  detail::GpuRuns runs(p.gpus);
  for (size_t c = 0; c < n; ++c)
    if (known(c))
      runs.cut(p.cands[c][a[c]].s.firstGpu, p.cands[c][a[c]].devices);
  runs.seal();
  std::vector<double> resident(runs.size(), 0.0), working(runs.size(), 0.0);
  for (int c : lastOf)
    if (c >= 0 && known(size_t(c)) && !p.cands[c][a[c]].s.offload) {
      const Candidate &k = p.cands[c][a[c]];
      runs.each(k.s.firstGpu, k.devices,
                [&](size_t i) { resident[i] += k.mem.weights; });
    }
  for (size_t c = 0; c < n; ++c) {
    if (!known(c))
      continue;
    const Candidate &k = p.cands[c][a[c]];
    const bool train = p.calls[c].shape.kind == cost::CallKind::Train;
    const double work = k.mem.working() + (k.s.offload ? k.mem.weights : 0.0);
    runs.each(k.s.firstGpu, k.devices, [&](size_t i) {
      if (train)
        resident[i] += k.mem.optimizer;
      working[i] = std::max(working[i], work);
    });
  }
  double worst = 0;
  for (size_t i = 0; i < runs.size(); ++i)
    if (resident[i] + working[i] > worst) {
      worst = resident[i] + working[i];
      if (gpu)
        *gpu = runs.first(i);
    }
  return worst;
}
