//===- EvalSlice.h - the ops held-out evaluation runs -----------*- C++ -*-===//
//
// An algorithm with `eval @d` scores its policy on held-out prompts: the
// rlhf-lower-to-runtime pass emits a second function that runs part of the
// iteration on a batch of @d (EvalSlice.cpp picks the part).
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_TRANSFORMS_EVALSLICE_H
#define RLHFC_TRANSFORMS_EVALSLICE_H

#include "rlhf/IR/RLHFOps.h"
#include "rlhfc/CostModel/CostModel.h"

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <string>

namespace rlhfc::lowering {

/// What evaluation reports: a reward of generated samples, as
/// `val/<label>`, or a train call's validation loss (and its metrics),
/// computed forward only, as `val/loss/MODEL` (and `val/NAME/MODEL`).
struct EvalScore {
  mlir::Operation *op; ///< a score's producer, or an rlhf.train_step
  std::string field;   ///< the score's field; "" for a loss
  std::string label;   ///< a score's label, or the trained model
  bool isLoss() const { return field.empty(); }
};

struct EvalSlice {
  /// In the iteration's order: the ops the scores depend on, and the model
  /// moves (reallocations, onloads, offloads) before the last of them, so
  /// that every call finds its model where the plan put it.
  llvm::SmallVector<mlir::Operation *> order;
  /// The moves among them, undone in reverse after a batch: the iteration
  /// then starts from its usual layouts.
  llvm::SmallVector<mlir::Operation *> moves;
  llvm::SmallVector<EvalScore> scores;
};

/// The first-order rewards of `alg`'s generated samples (a score that a
/// host computation or a frozen model's inference makes from them, not from
/// another score), the train steps fed by loads alone (no generate, train
/// step or ema upstream), and the ops they need. Fails, with an error at
/// `alg`, when there is neither.
mlir::FailureOr<EvalSlice> evalSlice(mlir::rlhf::AlgorithmOp alg);

/// A model's weights' mesh and strategy.
struct Placement {
  mlir::rlhf::MeshAttr mesh;
  mlir::rlhf::StrategyAttr strategy;
};

/// The models whose generate runs ahead of training with a copy of its own:
/// those the plan updates (rlhf.weight_update), as the lowering runs them.
llvm::StringSet<> modelsRunningAhead(mlir::rlhf::AlgorithmOp alg);

/// Where each model's weights are when an iteration starts: where its first
/// realloc takes them from, or where its first placed call runs. A generate
/// that runs ahead (its model has a weight update) keeps a copy of its own
/// and does not count.
llvm::StringMap<Placement> initialPlacements(mlir::rlhf::AlgorithmOp alg);

/// The plan's seconds for one batch of `alg`'s eval dataset through `es`
/// (EvalCost.cpp).
mlir::FailureOr<double> evalBatchTime(mlir::rlhf::AlgorithmOp alg,
                                      const EvalSlice &es,
                                      const cost::Calibration &cal);

} // namespace rlhfc::lowering

#endif // RLHFC_TRANSFORMS_EVALSLICE_H
