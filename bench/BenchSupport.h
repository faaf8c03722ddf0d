//===- BenchSupport.h - setup shared by the planner benchmarks --*- C++ -*-===//
//
// Lowering a program text to the rlhf dialect, wall-clock timing and
// printing a plan's calls and the synchronous floor: what
// rlhf-bench-planner and rlhf-bench-long-context both need; and the
// asynchronous sweep of rlhf-bench-planner --async.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_BENCH_BENCHSUPPORT_H
#define RLHFC_BENCH_BENCHSUPPORT_H

#include "rlhfc/Planner/Planner.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/CommandLine.h"

#include <chrono>
#include <string>

namespace rlhfc::bench {

/// The options both planner benchmarks take, in `cat`: the search budget,
/// one setting only, a calibration file, --quick (one generation length
/// per setting, `quickWhat` says which), and --ceiling (a floor per
/// setting, `ceilingWhat` says which) with the relaxed floor's node limit.
struct CommonOptions {
  CommonOptions(llvm::cl::OptionCategory &cat, const char *quickWhat,
                const char *ceilingWhat);
  /// Parses the command line (showing only `cat`'s options) and loads the
  /// calibration into `cal`; false, with the error printed as `tool`'s,
  /// when it does not load.
  bool parse(int argc, char **argv, const char *overview, llvm::StringRef tool,
             cost::Calibration &cal);
  llvm::cl::opt<int64_t> budget;
  llvm::cl::opt<bool> quick;
  llvm::cl::opt<int> only;
  llvm::cl::opt<std::string> calibrationFile;
  llvm::cl::opt<bool> ceiling;
  llvm::cl::opt<int64_t> floorNodes;

private:
  llvm::cl::OptionCategory &cat;
};

/// `text` checked and lowered to the rlhf dialect against the stdlib (null
/// on an error, which the context's handler reports).
mlir::OwningOpRef<mlir::ModuleOp> lower(mlir::MLIRContext &ctx,
                                        const std::string &text);

double secondsSince(std::chrono::steady_clock::time_point t0);

/// The calibration file's factors (none when `path` is empty); false, with
/// the error printed as `tool`'s, when it does not load.
bool loadCalibrationFile(const std::string &path, llvm::StringRef tool,
                         cost::Calibration &out);

/// A plan's calls, one line each, to stderr, under `what` and its
/// iteration time.
void printPlan(const plan::Problem &p, const plan::Assignment &a,
               llvm::StringRef what);

/// A floor under every synchronous plan of `p` (over its candidates):
/// iterationBounds with every call at its fastest, raised to relaxedFloor's
/// optimum where that branch and bound ends within `nodeLimit` nodes.
struct SyncFloor {
  double time = 0;
  bool relaxed = false;   ///< relaxedFloor ended; else iterationBounds alone
  plan::Assignment picks; ///< relaxedFloor's picks (placement not checked)
};
SyncFloor syncFloor(const plan::Problem &p, int64_t nodeLimit);

/// Diagnostic for staleness > 0: `alg` planned with its generator fixed on
/// each of its meshes at an edge of the cluster, the other calls anywhere
/// or apart (outside that mesh). Prints each plan's time and the best
/// against `current` to stderr, and returns the best (infinite: none).
double sweepAsync(mlir::rlhf::AlgorithmOp alg, const cost::Calibration &cal,
                  int64_t budget, double current, bool show);

} // namespace rlhfc::bench

#endif // RLHFC_BENCH_BENCHSUPPORT_H
