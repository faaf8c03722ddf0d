//===- FilterLoop.h - the loop dynamic sampling makes -----------*- C++ -*-===//
//
// rlhf-lower-to-runtime emits an iteration's ops in order, except that the
// ops an rlhf.filter_groups depends on become a loop (FilterLoop.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_TRANSFORMS_FILTERLOOP_H
#define RLHFC_TRANSFORMS_FILTERLOOP_H

#include "rlhf/IR/RLHFOps.h"

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"

#include <vector>

namespace rlhfc::lowering {

/// The iteration's ops in the order they are emitted, and the loop that
/// dynamic sampling makes of the ops a filter_groups depends on.
struct FilterLoop {
  std::vector<mlir::Operation *> order;
  mlir::Operation *loopStart = nullptr; ///< the loop's first op; null: no loop
  /// Model moves inside the loop, undone (in reverse) before a round again.
  llvm::SmallVector<mlir::Operation *> moves;
  llvm::StringRef dataset; ///< whose batches the rounds draw
};

/// The emission order of `alg`'s body: ops before the filter's first
/// dependency, model moves hoisted above the loop (those before its first
/// call), the loop (the filter's dependencies and the moves between them),
/// then the filter and the rest. Without a filter, the body's order. Fails,
/// with an error, on an op between the loop's ops that the loop can neither
/// repeat nor hoist.
mlir::FailureOr<FilterLoop> filterLoop(mlir::rlhf::AlgorithmOp alg);

} // namespace rlhfc::lowering

#endif // RLHFC_TRANSFORMS_FILTERLOOP_H
