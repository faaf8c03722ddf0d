//===- PassUtils.h - shared by the planning passes --------------*- C++ -*-===//

#ifndef RLHFC_LIB_TRANSFORMS_PASSUTILS_H
#define RLHFC_LIB_TRANSFORMS_PASSUTILS_H

#include "rlhf/IR/RLHFOps.h"
#include "rlhfc/Transforms/Pipeline.h"

namespace rlhfc {

/// The calibration named by a pass option ("" for the built-in factors);
/// errors are reported on `module`.
mlir::FailureOr<cost::Calibration> loadCalibrationFor(mlir::ModuleOp module,
                                                      llvm::StringRef path);

/// Whether a call op has both a mesh and a strategy.
bool isPlaced(mlir::Operation *op);

/// #rlhf.cost<time = seconds, memory = bytes>, the bytes to 6 significant
/// digits: a whole byte count past 2^24 has no short decimal form that
/// parses back to it, so the IR would print it in hex.
mlir::rlhf::CostAttr costAttr(mlir::MLIRContext *ctx, double seconds,
                              double bytes);

} // namespace rlhfc

#endif // RLHFC_LIB_TRANSFORMS_PASSUTILS_H
