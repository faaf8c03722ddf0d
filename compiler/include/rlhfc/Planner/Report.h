//===- Report.h - plans people can read -------------------------*- C++ -*-===//

#ifndef RLHFC_PLANNER_REPORT_H
#define RLHFC_PLANNER_REPORT_H

#include "rlhfc/Planner/Planner.h"

#include "llvm/Support/JSON.h"

namespace rlhfc::plan {

/// The plan of a placed algorithm as JSON: per call its mesh, strategy,
/// predicted time and memory per GPU; per reallocation and transfer its
/// bytes and time; the predicted iteration time and per-GPU peak memory.
llvm::json::Value planToJson(mlir::rlhf::AlgorithmOp alg, const Problem &p,
                             const SimResult &sim);

} // namespace rlhfc::plan

#endif // RLHFC_PLANNER_REPORT_H
