//===- Anneal.h - the annealing search and its asynchronous use -*- C++ -*-===//

#ifndef RLHFC_PLANNER_ANNEAL_H
#define RLHFC_PLANNER_ANNEAL_H

#include "rlhfc/Planner/Planner.h"

#include <functional>
#include <optional>

namespace rlhfc::plan::detail {

/// Called with every plan the annealing scores that fits, and its time.
using SeenFn = std::function<void(const Assignment &, double)>;

/// Simulated annealing from the baselines, the partition starts and `seed`,
/// then a steepest descent (Search.cpp). Deterministic for o.seed.
std::optional<Assignment> anneal(const Problem &p, const SearchOptions &o,
                                 SearchStats &stats,
                                 const Assignment *seed = nullptr,
                                 const SeenFn &seen = nullptr);

/// The options of the synchronous annealing whose plan starts the search
/// under staleness: a quarter of the budget, no polish (Search.cpp).
SearchOptions synchronousStart(const SearchOptions &o);

/// The search under staleness k > 0: the annealing, then each of the few
/// best generator meshes it saw searched again with the generators fixed
/// there (SearchAsync.cpp). `seed` is one of the annealing's starts.
std::optional<Assignment> searchAsync(const Problem &p, const SearchOptions &o,
                                      SearchStats &stats,
                                      const Assignment *seed = nullptr);

/// The search under staleness as solve() runs it: the synchronous start and
/// searchAsync on the candidates without offloading, then, where the problem
/// offers offloaded ones, searchAsync on all of them from that plan
/// (SearchAsync.cpp).
std::optional<Assignment> solveAsync(const Problem &p, const SearchOptions &o,
                                     SearchStats &stats);

} // namespace rlhfc::plan::detail

#endif // RLHFC_PLANNER_ANNEAL_H
