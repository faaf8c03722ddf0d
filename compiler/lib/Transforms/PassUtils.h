//===- PassUtils.h - shared by the planning passes --------------*- C++ -*-===//

#ifndef RLHFC_LIB_TRANSFORMS_PASSUTILS_H
#define RLHFC_LIB_TRANSFORMS_PASSUTILS_H

#include "rlhfc/Transforms/Pipeline.h"

namespace rlhfc {

/// The calibration named by a pass option ("" for the built-in factors);
/// errors are reported on `module`.
mlir::FailureOr<cost::Calibration> loadCalibrationFor(mlir::ModuleOp module,
                                                      llvm::StringRef path);

/// Whether a call op has both a mesh and a strategy.
bool isPlaced(mlir::Operation *op);

} // namespace rlhfc

#endif // RLHFC_LIB_TRANSFORMS_PASSUTILS_H
