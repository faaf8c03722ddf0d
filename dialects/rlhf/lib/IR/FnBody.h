//===- FnBody.h - verifying function bodies (private) -----------*- C++ -*-===//

#ifndef RLHF_IR_FNBODY_H
#define RLHF_IR_FNBODY_H

#include "mlir/IR/Operation.h"

namespace mlir::rlhf {

/// Checks the body of a compute or train step of kind `fn`: named, one block
/// whose arguments mirror `inputs`, ending in an rlhf.yield of the `results`
/// fields: tensors for host functions; for losses, f64 scalars, the first
/// (the loss) reading the trained model, the rest metrics.
LogicalResult verifyFnBody(Operation *op, StringAttr fn, ValueRange inputs,
                           Region &body, bool loss,
                           ArrayRef<RankedTensorType> results);

/// A host function written in C++ (exact_match, script_reward) carries
/// neither a function name nor a body.
LogicalResult verifyNoFnBody(Operation *op, StringAttr fn, Region &body);

} // namespace mlir::rlhf

#endif // RLHF_IR_FNBODY_H
