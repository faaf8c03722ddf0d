//===- MLIRGen.h - checked program to the rlhf dialect ----------*- C++ -*-===//

#ifndef RLHFC_FRONTEND_MLIRGEN_H
#define RLHFC_FRONTEND_MLIRGEN_H

#include "rlhfc/Frontend/Sema.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace rlhfc {

/// Lowers a checked program to a module of `rlhf` ops: the declarations, and
/// one `rlhf.algorithm` per run. Every op carries the FileLineColLoc of the
/// .rlhf source it came from. Returns null (after reporting) if the result
/// fails to verify, which would be a compiler bug.
mlir::OwningOpRef<mlir::ModuleOp> mlirGen(const sema::Program &program,
                                          mlir::MLIRContext &ctx);

} // namespace rlhfc

#endif // RLHFC_FRONTEND_MLIRGEN_H
