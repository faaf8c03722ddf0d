//===- Pipeline.h - the planning pipeline of rlhfc --------------*- C++ -*-===//
//
// The passes `rlhfc --emit=plan` runs after MLIRGen, in order, so that every
// tool that shows a plan (rlhfc, the language server) shows the same one.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_TRANSFORMS_PIPELINE_H
#define RLHFC_TRANSFORMS_PIPELINE_H

#include "rlhfc/Planner/Planner.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"

namespace rlhfc {

struct PlanningOptions {
  std::string planner = "search"; ///< search, heuristic, colocated, ...
  int64_t budget = 200000;        ///< assignments the search may simulate
  uint64_t seed = 1;
  std::string calibration; ///< JSON file of efficiency factors, or ""
  bool progress = false;   ///< report the search's progress on stderr
};

/// Why `o` cannot plan (an unknown planner, a budget below 1), as a message
/// that names the flag to fix; success otherwise. Tools check their flags
/// with it before reading a program, and the placement pass its options.
llvm::Error checkPlanningOptions(const PlanningOptions &o);

/// PlanningOptions as command-line flags (--planner, --search-budget, --seed,
/// --calibration, --progress), one set for every tool that plans (rlhfc, the
/// language server). Construct it before llvm::cl::ParseCommandLineOptions.
/// A tool whose stderr is a log, not a terminal (the language server), plans
/// without progress and does not offer the flag.
class PlanningCLOptions {
public:
  explicit PlanningCLOptions(llvm::cl::OptionCategory &category,
                             bool offerProgress = true);
  PlanningOptions get() const;
  /// Whether --planner was given (a mode that does not plan rejects it).
  bool plannerGiven() const { return planner.getNumOccurrences() > 0; }

private:
  bool offerProgress;
  llvm::cl::opt<std::string> planner;
  llvm::cl::opt<int64_t> budget;
  llvm::cl::opt<uint64_t> seed;
  llvm::cl::opt<std::string> calibration;
  llvm::cl::opt<llvm::cl::boolOrDefault> progress;
};

/// Adds infer-shapes, assign-placement, insert-realloc, insert-transfer,
/// check-memory, estimate-cost and schedule to `pm`.
void buildPlanningPipeline(mlir::OpPassManager &pm,
                           const PlanningOptions &opts);

/// Runs that pipeline on a lowered module; errors (a predicted OOM, no
/// placement that fits) are reported at the calls' .rlhf locations.
mlir::LogicalResult runPlanningPipeline(mlir::ModuleOp module,
                                        const PlanningOptions &opts);

/// Simulates the placed algorithm. Fails (with errors reported) if a call is
/// unplaced or a problem cannot be built.
mlir::FailureOr<std::pair<plan::Problem, plan::SimResult>>
simulatePlaced(mlir::rlhf::AlgorithmOp alg, const cost::Calibration &cal,
               bool record);

} // namespace rlhfc

#endif // RLHFC_TRANSFORMS_PIPELINE_H
