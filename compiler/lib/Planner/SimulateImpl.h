//===- SimulateImpl.h - shared by the two simulators ------------*- C++ -*-===//

#ifndef RLHFC_PLANNER_SIMULATEIMPL_H
#define RLHFC_PLANNER_SIMULATEIMPL_H

#include "rlhfc/Planner/Planner.h"

#include "llvm/ADT/ArrayRef.h"

#include <algorithm>
#include <vector>

namespace rlhfc::plan::detail {

/// When each GPU is next free, for the simulators' list scheduling.
class GpuTimeline {
public:
  explicit GpuTimeline(int64_t gpus) : busy(size_t(gpus), 0.0) {}
  double busyUntil(int64_t first, int64_t count) const {
    double t = 0;
    for (int64_t g = first; g < first + count; ++g)
      t = std::max(t, busy[size_t(g)]);
    return t;
  }
  void occupy(int64_t first, int64_t count, double until) {
    for (int64_t g = first; g < first + count; ++g)
      busy[size_t(g)] = until;
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
  std::vector<double> busy;
};

/// When call `c` of assignment `a` has its inputs in iteration `it`: each
/// producer's end (`finished[d]`) plus, between two model calls, the
/// transfer of its rows into c's layout (recorded in `events` when given).
inline double inputsReady(const Problem &p, const Assignment &a, size_t c,
                          int it, llvm::ArrayRef<double> finished,
                          std::vector<Event> *events) {
  const Call &call = p.calls[c];
  double ready = 0;
  for (auto [d, bytes] : call.deps) {
    double t = finished[d];
    if (!call.host && !p.calls[d].host) {
      const Candidate &from = p.cands[d][a[d]], &to = p.cands[c][a[c]];
      cost::MoveEstimate mv = cost::estimateTransfer(bytes, p.hw, from.s, to.s);
      if (mv.time > 0 && events)
        events->push_back({Event::Transfer, int(c), it, t, t + mv.time,
                           to.s.firstGpu, to.devices, bytes});
      t += mv.time;
    }
    ready = std::max(ready, t);
  }
  return ready;
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
