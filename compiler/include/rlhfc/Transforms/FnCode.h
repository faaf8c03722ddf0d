//===- FnCode.h - function bodies as runtime fn code ------------*- C++ -*-===//

#ifndef RLHFC_TRANSFORMS_FNCODE_H
#define RLHFC_TRANSFORMS_FNCODE_H

#include "rlhf/IR/RLHFOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace rlhfc {

/// The fn code (runtime/include/rlhf/runtime/FnProgram.h) of the body of a
/// compute or train step of kind `fn`: version 2 with the call's
/// file:line:col, which the runtime's errors name, when `withCallSite` and
/// the op has one; version 1 otherwise. Fails, with an error on the op, on
/// an op the runtime does not evaluate.
mlir::FailureOr<std::string> encodeFnCode(mlir::rlhf::ComputeOp op,
                                          bool withCallSite = true);
mlir::FailureOr<std::string> encodeFnCode(mlir::rlhf::TrainStepOp op,
                                          bool withCallSite = true);

/// Prints the fn code of every function call in `module`, in program
/// order, separated by blank lines (`rlhfc --emit=fn-code`), without call
/// sites: the text depends on the function alone.
mlir::LogicalResult printFnCode(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace rlhfc

#endif // RLHFC_TRANSFORMS_FNCODE_H
