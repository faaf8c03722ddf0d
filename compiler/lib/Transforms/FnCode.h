//===- FnCode.h - function bodies as runtime fn code (private) --*- C++ -*-===//

#ifndef RLHFC_LIB_TRANSFORMS_FNCODE_H
#define RLHFC_LIB_TRANSFORMS_FNCODE_H

#include "rlhf/IR/RLHFOps.h"

#include <string>

namespace rlhfc {

/// The fn code (runtime/include/rlhf/runtime/FnProgram.h, version 1) of the
/// body of a compute or train step of kind `fn`. Fails, with an error on
/// the op, on an op the runtime does not evaluate.
mlir::FailureOr<std::string> encodeFnCode(mlir::rlhf::ComputeOp op);
mlir::FailureOr<std::string> encodeFnCode(mlir::rlhf::TrainStepOp op);

} // namespace rlhfc

#endif // RLHFC_LIB_TRANSFORMS_FNCODE_H
