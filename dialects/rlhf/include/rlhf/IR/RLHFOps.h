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

/// How often `op` runs per iteration, as the planner prices it: the
/// `expected_rounds` of the rlhf.filter_groups its results feed (dynamic
/// sampling repeats it), else 1.
double expectedRounds(Operation *op);

/// `drawn`, a record of rows per prompt or per sample of `drawnPrompts`
/// prompts, with the rows of `keptPrompts` prompts instead: what
/// rlhf.filter_groups keeps of it. Null when a field has neither.
RecordType keptRowsType(RecordType drawn, int64_t drawnPrompts,
                        int64_t keptPrompts);

/// The bounds of what a .rlhf program declares, which Sema checks and the
/// verifier keeps for hand-written IR too: the planner sizes per-GPU vectors
/// by them, and products of layout degrees stay far from overflow.
constexpr int64_t kMaxNodes = int64_t(1) << 16, kMaxGpusPerNode = 64,
                  kMaxGpus = kMaxNodes * kMaxGpusPerNode, kMaxStaleness = 64,
                  kMaxSteps = int64_t(1) << 40, kMaxNewTokens = 1 << 20,
                  kMaxSamples = 1024, kMaxMinibatches = 1 << 20,
                  kMaxEpochs = 1000, kMaxPlaceDegree = 1 << 20;
/// An architecture's sizes.
constexpr int64_t kMaxLayers = 1024, kMaxHidden = 1 << 20, kMaxHeads = 4096,
                  kMaxFfn = 1 << 22, kMaxVocab = 1 << 24, kMaxSeqLen = 1 << 24;

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

/// How `sp` sequence-parallel ranks split into USP's two levels (arXiv
/// 2405.07719): `ulysses` ranks all-to-all heads inside a node, and `ring`
/// groups of them pass K/V blocks around a ring, across nodes.
struct SpSplit {
  int64_t ulysses = 1, ring = 1;
};

/// The one rule, for Sema, the cost model, the planner and the layouts
/// compiled programs run: ulysses is the largest divisor of sp whose groups
/// (u * tp consecutive GPUs from the mesh's `firstGpu`: ranks run dp, sp,
/// pp, tp from the outside in, and sp implies pp = 1) tile nodes, so no
/// all-to-all crosses one, and that divides the heads per tp rank (kv heads
/// may repeat); ring = sp / ulysses.
inline SpSplit splitSp(int64_t sp, int64_t tp, int64_t heads,
                       int64_t gpusPerNode, int64_t firstGpu) {
  SpSplit out;
  if (sp <= 1 || tp <= 0)
    return out;
  const int64_t headsPerTp = heads / tp;
  for (int64_t u = sp; u >= 1; --u)
    if (sp % u == 0 && gpusPerNode % (u * tp) == 0 &&
        firstGpu % (u * tp) == 0 && headsPerTp % u == 0) {
      out.ulysses = u;
      break;
    }
  out.ring = sp / out.ulysses;
  return out;
}

/// The type of a value in a function body (RLHFFnOps.td): f64 for rank 0,
/// f32 tensors of dynamic shape for ranks 1 and 2, i32 ones for token ids.
Type fnValueType(MLIRContext *ctx, int64_t rank, bool tokens);
/// The body type of a call's input of kinded type `kinded`.
Type fnValueType(RankedTensorType kinded);

} // namespace mlir::rlhf

#endif // RLHF_IR_RLHFOPS_H
