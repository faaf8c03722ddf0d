//===- SimulateImpl.h - shared by the two simulators ------------*- C++ -*-===//

#ifndef RLHFC_PLANNER_SIMULATEIMPL_H
#define RLHFC_PLANNER_SIMULATEIMPL_H

#include "rlhfc/Planner/Planner.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace rlhfc::plan::detail {

/// Adds each GPU's largest working set (`working`) to the resident bytes in
/// r.peakMemory, flags the first GPU over the limit and, when `record`,
/// steps the memory over time: resident state all along, plus each call's
/// working set (`workingSet(call, gpu)`) while it runs.
void finishMemory(const Problem &p, SimResult &r,
                  const std::vector<double> &working, bool record,
                  llvm::function_ref<double(size_t, int64_t)> workingSet);

} // namespace rlhfc::plan::detail

#endif // RLHFC_PLANNER_SIMULATEIMPL_H
