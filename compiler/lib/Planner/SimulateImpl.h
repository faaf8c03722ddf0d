//===- SimulateImpl.h - shared by the two simulators ------------*- C++ -*-===//

#ifndef RLHFC_PLANNER_SIMULATEIMPL_H
#define RLHFC_PLANNER_SIMULATEIMPL_H

#include "rlhfc/Planner/Planner.h"

#include "llvm/ADT/ArrayRef.h"

namespace rlhfc::plan::detail {

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
