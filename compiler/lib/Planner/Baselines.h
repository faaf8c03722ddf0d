//===- Baselines.h - heuristic, colocated and separated plans -*- C++ -*---===//
//-*-===//

#ifndef RLHFC_PLANNER_BASELINES_H
#define RLHFC_PLANNER_BASELINES_H

#include "rlhfc/Planner/Planner.h"

#include <optional>
#include <utility>
#include <vector>

namespace rlhfc::plan::detail {

/// The smaller working set, and offloaded (no resting weights) on a tie.
bool smallerFootprint(const Candidate &x, const Candidate &y);

/// Every model call at its first candidate, host calls unassigned.
Assignment emptyAssignment(const Problem &p);

/// Given each free call's mesh, the fastest strategies there that fit
/// together (nullopt when a call has no candidate there, or the smallest
/// footprints overflow). Baselines never offload; search starts may.
std::optional<Assignment>
fastestFitting(const Problem &p,
               const std::vector<std::pair<int64_t, int64_t>> &meshOf,
               bool offload = false);

/// ReaLHF's symmetric Megatron-style plan; with `savers`, memory savers at
/// the same (tp, pp) come before a deeper pipeline.
std::optional<Assignment> heuristic(const Problem &p, bool savers = false);
/// verl-like: every call on all GPUs at its fastest strategy there.
std::optional<Assignment> colocated(const Problem &p);
/// OpenRLHF-like: disjoint GPU groups per model, sized by parameters.
std::optional<Assignment> separated(const Problem &p);

} // namespace rlhfc::plan::detail

#endif // RLHFC_PLANNER_BASELINES_H
