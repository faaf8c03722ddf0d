//===- SimulateImpl.h - shared by the two simulators ------------*- C++ -*-===//

#ifndef RLHFC_PLANNER_SIMULATEIMPL_H
#define RLHFC_PLANNER_SIMULATEIMPL_H

#include "rlhfc/Planner/Planner.h"

#include "llvm/ADT/ArrayRef.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

namespace rlhfc::plan::detail {

/// When each GPU is next free, for the simulators' list scheduling. Calls
/// occupy runs of GPUs, so the times are kept as runs of equal time (a few
/// per call, against every GPU of a 128-GPU cluster per query).
class GpuTimeline {
public:
  explicit GpuTimeline(int64_t gpus) : gpus(gpus), runs{{0, 0.0}} {}
  double busyUntil(int64_t first, int64_t count) const {
    double t = 0;
    if (count <= 0)
      return t;
    for (size_t i = runAt(first);
         i < runs.size() && runs[i].first < first + count; ++i)
      t = std::max(t, runs[i].second);
    return t;
  }
  void occupy(int64_t first, int64_t count, double until) {
    if (count <= 0)
      return;
    const int64_t last = first + count;
    // The run that resumes after the range keeps its time.
    std::optional<std::pair<int64_t, double>> after;
    if (last < gpus)
      after = std::make_pair(last, runs[runAt(last)].second);
    auto lo =
        std::lower_bound(runs.begin(), runs.end(), first,
                         [](const auto &r, int64_t g) { return r.first < g; });
    auto hi =
        std::upper_bound(lo, runs.end(), last,
                         [](int64_t g, const auto &r) { return g < r.first; });
    lo = runs.erase(lo, hi);
    lo = runs.insert(lo, {first, until});
    if (after)
      runs.insert(lo + 1, *after);
  }
  /// A parameter move over `span` lasting `duration`: it starts once
  /// `ready` and every GPU of the span is free, and holds them all until it
  /// ends (no call runs beside it there). With `events`, one event of `kind`
  /// per range, carrying `bytes`. Returns its end.
  double move(const ReallocSpan &span, double ready, double duration,
              std::vector<Event> *events, Event::Kind kind, int call,
              int iteration, double bytes = 0) {
    for (auto [first, count] : span.ranges)
      ready = std::max(ready, busyUntil(first, count));
    for (auto [first, count] : span.ranges)
      occupy(first, count, ready + duration);
    if (events)
      for (auto [first, count] : span.ranges)
        if (count)
          events->push_back({kind, call, iteration, ready, ready + duration,
                             first, count, bytes});
    return ready + duration;
  }

private:
  /// The index of the run holding GPU `g`.
  size_t runAt(int64_t g) const {
    auto it =
        std::upper_bound(runs.begin(), runs.end(), g,
                         [](int64_t x, const auto &r) { return x < r.first; });
    return size_t(it - runs.begin()) - 1;
  }
  int64_t gpus;
  /// (first GPU, free from), by first GPU; each run ends where the next
  /// begins, the last at `gpus`.
  std::vector<std::pair<int64_t, double>> runs;
};

/// The runs that some GPU ranges cut [0, gpus) into. Every GPU of a run
/// lies in the same ranges, so a sum over the ranges takes one value per
/// run, not per GPU (a few runs against 128 GPUs in the memory checks).
class GpuRuns {
public:
  explicit GpuRuns(int64_t gpus) : cuts{0, gpus} {}
  void cut(int64_t first, int64_t count) {
    if (count > 0) {
      cuts.push_back(first);
      cuts.push_back(first + count);
    }
  }
  /// Call once all ranges are cut, before the rest.
  void seal() {
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  }
  size_t size() const { return cuts.size() - 1; }
  int64_t first(size_t run) const { return cuts[run]; }
  /// `f(run)` for each run of a range that was cut.
  template <typename F> void each(int64_t first, int64_t count, F f) const {
    size_t i = size_t(std::lower_bound(cuts.begin(), cuts.end(), first) -
                      cuts.begin());
    for (; i + 1 < cuts.size() && cuts[i] < first + count; ++i)
      f(i);
  }
  /// One value per GPU from one per run.
  std::vector<double> perGpu(llvm::ArrayRef<double> values) const {
    std::vector<double> out(size_t(cuts.back()));
    for (size_t i = 0; i < size(); ++i)
      std::fill(out.begin() + cuts[i], out.begin() + cuts[i + 1], values[i]);
    return out;
  }

private:
  std::vector<int64_t> cuts;
};

/// Transfers already made in a simulation: (value, destination first GPU,
/// GPUs, dp, iteration) -> when the rows are there.
using TransferMemo =
    std::map<std::tuple<const void *, int64_t, int64_t, int64_t, int>, double>;

/// When call `c` of assignment `a` has its inputs in iteration `it`: each
/// producer's end (`finished[d]`) plus, between two model calls, the
/// transfer of its rows into c's rows layout (recorded in `events` when
/// given), made once per value and layout (`moved`).
inline double inputsReady(const Problem &p, const Assignment &a, size_t c,
                          int it, llvm::ArrayRef<double> finished,
                          std::vector<Event> *events, TransferMemo &moved) {
  const Call &call = p.calls[c];
  double ready = 0;
  for (size_t i = 0; i < call.deps.size(); ++i) {
    auto [d, bytes] = call.deps[i];
    double t = finished[d];
    if (!call.host && !p.calls[d].host) {
      const Candidate &from = p.cands[d][a[d]], &to = p.cands[c][a[c]];
      cost::MoveEstimate mv = cost::estimateTransfer(bytes, p.hw, from.s, to.s);
      if (mv.time > 0) {
        const void *value =
            i < call.depValues.size() ? call.depValues[i] : nullptr;
        auto [at, fresh] = moved.try_emplace(
            {value, to.s.firstGpu, to.devices, to.s.dp, it}, t + mv.time);
        if (!value || fresh) {
          at->second = t + mv.time;
          if (events)
            events->push_back({Event::Transfer, int(c), it, t, t + mv.time,
                               to.s.firstGpu, to.devices, bytes});
        }
        t = at->second;
      }
    }
    ready = std::max(ready, t);
  }
  return ready;
}

/// Gives each model that no call places its parked layout
/// (Problem::parked), where it rests all along.
inline void parkCallless(const Problem &p,
                         std::vector<const Candidate *> &layout) {
  for (size_t m = 0; m < p.parked.size(); ++m)
    if (!layout[m] && p.parked[m])
      layout[m] = &*p.parked[m];
}

/// Runs the `ema` statements placed before call `before` (p.calls.size():
/// those after the last call). Each waits for its two models, then moves
/// the source's weights into the target's layout and blends them into the
/// target's master weights there, holding both layouts' GPUs meanwhile
/// (GpuTimeline::move); both models are busy until it ends. Returns the
/// latest end (0: none ran). A model with no layout on the GPUs (offloaded)
/// has nothing to move: Problem keeps ema's models off host memory.
inline double runAverages(const Problem &p, size_t before,
                          llvm::ArrayRef<const Candidate *> layout,
                          std::vector<double> &modelReady, GpuTimeline &gpus,
                          std::vector<Event> *events, int iteration) {
  double last = 0;
  for (size_t i = 0; i < p.averages.size(); ++i) {
    const Average &e = p.averages[i];
    if (e.before != before)
      continue;
    const Candidate *from = layout[e.source], *to = layout[e.target];
    if (!from || !to)
      continue;
    double time = cost::emaUpdateTime(p.models[e.target].arch, p.hw, to->s,
                                      to->mem.weights);
    double moved = 0;
    if (!cost::sameLayout(from->s, to->s)) {
      const cost::MoveEstimate &mv = p.reallocMove(e.source, from->s, to->s);
      time += mv.time;
      moved = mv.movedBytes();
    }
    double ready = std::max(modelReady[e.source], modelReady[e.target]);
    double end = gpus.move(reallocSpan(*from, *to), ready, time, events,
                           Event::Average, int(i), iteration, moved);
    modelReady[e.source] = modelReady[e.target] = end;
    last = std::max(last, end);
  }
  return last;
}

/// r.peakMemory per GPU of assignment `a`: resting weights (`layout[m]`,
/// each model's), gradients and optimizer state, and the largest working
/// set of a call on the GPU; a call marked in `owns` (an async generate;
/// empty: none) keeps its weights and `inFlight` batches resident. Flags the
/// first GPU over the limit and, when `record`, steps the memory over time:
/// resident state all along, plus each call's working set while it runs.
void simulateMemory(const Problem &p, const Assignment &a,
                    llvm::ArrayRef<const Candidate *> layout,
                    llvm::ArrayRef<char> owns, int64_t inFlight, bool record,
                    SimResult &r);

} // namespace rlhfc::plan::detail

#endif // RLHFC_PLANNER_SIMULATEIMPL_H
