//===- FromIR.h - cost-model inputs from rlhf IR ----------------*- C++ -*-===//

#ifndef RLHFC_COSTMODEL_FROMIR_H
#define RLHFC_COSTMODEL_FROMIR_H

#include "rlhfc/CostModel/CostModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "rlhf/IR/RLHFOps.h"
#include "llvm/Support/raw_ostream.h"

namespace rlhfc::cost {

/// The cluster's hardware, with `cal`'s factors where it names the hardware
/// (empty: the built-ins).
Hardware hardwareOf(mlir::rlhf::ClusterOp cluster, const Calibration &cal);
Arch archOf(mlir::rlhf::ModelOp model);

/// The shape of a generate, inference or train_step op.
CallShape shapeOf(mlir::Operation *call, mlir::rlhf::ModelOp model);

/// Time and controller memory of a host function: its body's ops for a
/// function written in the language; two passes over the tokens for
/// exact_match and script_reward, plus the latter's requests; its time
/// per iteration, so times the rounds of the dynamic sampling that repeats
/// it (mlir::rlhf::expectedRounds).
HostEstimate estimateHost(mlir::rlhf::ComputeOp op);

/// The cost model's view of a mesh and strategy attribute pair.
Strategy strategyFrom(mlir::rlhf::MeshAttr mesh, mlir::rlhf::StrategyAttr st);

/// The call's pinned or planned strategy, if it has one.
std::optional<Strategy> strategyOf(mlir::Operation *call);

/// A simple default when nothing is pinned: the whole cluster, tensor
/// parallel inside a node as far as the heads allow, data parallel across.
Strategy defaultStrategy(const Arch &arch, const Hardware &hw, int64_t gpus,
                         const CallShape &shape);

/// Prints, for every call of every algorithm in `module`, its placement and
/// the estimated time and per-GPU memory broken into parts.
mlir::LogicalResult printEstimates(mlir::ModuleOp module, const Calibration &cal,
                                   llvm::raw_ostream &os);

} // namespace rlhfc::cost

#endif // RLHFC_COSTMODEL_FROMIR_H
