//===- Cycle.h - the longest chain of a model's calls -----------*- C++ -*-===//
//
// A model's first call of iteration k+1 waits for its last call of
// iteration k, and that call waits on its dependency chain. The bounds of
// the exact search and the relaxed floor both walk these chains, and both
// price the windows of calls that never overlap; they differ only in what a
// call, a data edge and a reallocation cost.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_PLANNER_CYCLE_H
#define RLHFC_PLANNER_CYCLE_H

#include "rlhfc/Planner/Planner.h"

#include <algorithm>
#include <vector>

namespace rlhfc::plan {

/// Calls of each model in program order, and for each call the previous
/// call of its model (cyclically), where its parameters come from.
struct ModelCalls {
  std::vector<std::vector<size_t>> of;
  std::vector<int> prev;

  explicit ModelCalls(const Problem &p)
      : of(p.models.size()), prev(p.calls.size(), -1) {
    for (size_t c = 0; c < p.calls.size(); ++c)
      if (!p.calls[c].host)
        of[p.calls[c].model].push_back(c);
    for (auto &cs : of)
      for (size_t i = 0; i < cs.size(); ++i)
        prev[cs[i]] = int(cs[(i + cs.size() - 1) % cs.size()]);
  }
};

/// The longest chain from a model's first call to its last, over data edges
/// and same-model edges. `time(c)` is a call's time (0 for host calls),
/// `edge(d, c, bytes)` the cost of the data edge d -> c, and `realloc(c)`
/// that of reallocating into c. `dist` is scratch space.
template <typename Time, typename Edge, typename Realloc>
double longestCycle(const Problem &p, const ModelCalls &mc,
                    std::vector<double> &dist, Time time, Edge edge,
                    Realloc realloc) {
  double longest = 0;
  dist.resize(p.calls.size());
  for (const auto &cs : mc.of) {
    if (cs.empty())
      continue;
    size_t first = cs.front(), last = cs.back();
    std::fill(dist.begin(), dist.end(), -1.0);
    dist[first] = realloc(first) + time(first);
    for (size_t c = first + 1; c <= last; ++c) {
      double ready = -1;
      for (auto [d, bytes] : p.calls[c].deps)
        if (dist[d] >= 0)
          ready = std::max(ready, dist[d] + edge(size_t(d), c, bytes));
      // The previous call of the same model in this iteration.
      int q = mc.prev[c];
      if (!p.calls[c].host && q < int(c) && dist[q] >= 0)
        ready = std::max(ready, dist[q] + realloc(c));
      if (ready >= 0)
        dist[c] = ready + time(c);
    }
    longest = std::max(longest, dist[last]);
  }
  return longest;
}

/// The longest Problem::windows() entry: its serial calls' times plus its
/// apart calls' GPU-seconds over the cluster's GPUs (`area(c)`, already
/// divided by the GPU count).
template <typename Time, typename Area>
double longestWindow(const Problem &p, Time time, Area area) {
  double longest = 0;
  for (const Problem::Window &w : p.windows()) {
    double t = 0;
    for (size_t c : w.serial)
      t += time(c);
    for (size_t c : w.apart)
      t += area(c);
    longest = std::max(longest, t);
  }
  return longest;
}

} // namespace rlhfc::plan

#endif // RLHFC_PLANNER_CYCLE_H
