//===- RLHFOps.h - rlhf dialect operations ----------------------*- C++ -*-===//

#ifndef RLHF_IR_RLHFOPS_H
#define RLHF_IR_RLHFOPS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "rlhf/IR/RLHFDialect.h"

namespace mlir::rlhf {
class ClusterOp;
} // namespace mlir::rlhf

#define GET_OP_CLASSES
#include "rlhf/IR/RLHFOps.h.inc"

namespace mlir::rlhf {

/// Whether `op` runs a model (generate, inference or train_step): the ops the
/// planner places and the runtime executes.
inline bool isModelCall(Operation *op) {
  return isa<GenerateOp, InferenceOp, TrainStepOp>(op);
}

/// The first GPU of a tensor-parallel group that spans two nodes, on a mesh
/// of `size` GPUs from `first` (ranks are tp-major: each run of tp GPUs is
/// one group), or -1 when every group stays inside a node.
inline int64_t tpGroupAcrossNodes(int64_t first, int64_t size, int64_t tp,
                                  int64_t gpusPerNode) {
  for (int64_t g = first; g < first + size; g += tp)
    if (g / gpusPerNode != (g + tp - 1) / gpusPerNode)
      return g;
  return -1;
}

/// The type of a value in a function body (RLHFFnOps.td): f64 for rank 0,
/// f32 tensors of dynamic shape for ranks 1 and 2, i32 ones for token ids.
Type fnValueType(MLIRContext *ctx, int64_t rank, bool tokens);
/// The body type of a call's input of kinded type `kinded`.
Type fnValueType(RankedTensorType kinded);

} // namespace mlir::rlhf

#endif // RLHF_IR_RLHFOPS_H
