//===- InsertTransfer.cpp - rlhf-insert-transfer --------------------------===//

#include "PassUtils.h"
#include "rlhfc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <map>
#include <tuple>

namespace rlhfc {
#define GEN_PASS_DEF_RLHFINSERTTRANSFER
#include "rlhfc/Transforms/Passes.h.inc"
} // namespace rlhfc

using namespace mlir;
using namespace rlhfc;
namespace r = mlir::rlhf;

namespace {

/// The model call whose record `v` was taken from, if any.
Operation *producingCall(Value v) {
  Operation *def = v.getDefiningOp();
  while (def && isa<r::FieldOp>(def))
    def = def->getOperand(0).getDefiningOp();
  if (def && r::isModelCall(def))
    return def;
  return nullptr;
}

struct InsertTransfer : rlhfc::impl::RLHFInsertTransferBase<InsertTransfer> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto alg : module.getOps<r::AlgorithmOp>()) {
      auto cluster = alg.getClusterOp();
      if (!cluster)
        continue;
      cost::Hardware hw = cost::hardwareOf(cluster, {});
      OpBuilder b(module.getContext());
      // (value, mesh, dp) -> its copy there
      std::map<std::tuple<const void *, const void *, int64_t>, Value> moved;
      for (Operation &op : llvm::make_early_inc_range(alg.getBodyBlock())) {
        if (!r::isModelCall(&op))
          continue;
        auto to = op.getAttrOfType<r::MeshAttr>("mesh");
        auto toSt = op.getAttrOfType<r::StrategyAttr>("strategy");
        if (!to || !toSt)
          continue;
        for (OpOperand &use : op.getOpOperands()) {
          Operation *prod = producingCall(use.get());
          if (!prod)
            continue;
          auto from = prod->getAttrOfType<r::MeshAttr>("mesh");
          auto fromSt = prod->getAttrOfType<r::StrategyAttr>("strategy");
          // Rows sit with dp groups: a dp change on one mesh moves them too.
          if (!from || !fromSt ||
              (from == to && fromSt.getDp() == toSt.getDp()))
            continue;
          auto key = std::make_tuple(use.get().getAsOpaquePointer(),
                                     to.getAsOpaquePointer(), toSt.getDp());
          if (auto it = moved.find(key); it != moved.end()) {
            use.set(it->second);
            continue;
          }
          auto type = cast<RankedTensorType>(use.get().getType());
          double bytes = double(type.getNumElements()) *
                         std::max<unsigned>(1, type.getElementTypeBitWidth() / 8);
          cost::MoveEstimate mv =
              cost::estimateTransfer(bytes, hw, cost::strategyFrom(from, fromSt),
                                     cost::strategyFrom(to, toSt));
          b.setInsertionPoint(&op);
          auto t = b.create<r::TransferOp>(
              op.getLoc(), use.get().getType(), use.get(), from, fromSt.getDp(),
              to, toSt.getDp(), costAttr(module.getContext(), mv.time, bytes));
          moved[key] = t.getResult();
          use.set(t.getResult());
        }
      }
    }
  }
};

} // namespace
