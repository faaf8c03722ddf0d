//===- RLHFMoveOps.cpp - moves of weights and rows between layouts --------===//
//
// rlhf.realloc, rlhf.weight_update, rlhf.onload/offload and rlhf.transfer:
// the ops the planner inserts between calls that place a model or a batch
// differently.
//
//===----------------------------------------------------------------------===//

#include "Verifiers.h"

using namespace mlir;
using namespace mlir::rlhf;
using namespace mlir::rlhf::verifiers;

/// Both layouts of a move of a model's weights (realloc, weight_update) are
/// well formed on their own.
namespace {

template <typename MoveOp> LogicalResult verifyMoveLayouts(MoveOp op) {
  return failure(
      failed(verifyLayout(op, op.getFromMesh(), op.getFrom(),
                          "source layout: ")) ||
      failed(verifyLayout(op, op.getToMesh(), op.getTo(), "target layout: ")));
}

/// The source and target of such a move are layouts of one architecture,
/// and both fit the cluster.
template <typename MoveOp>
LogicalResult verifyMoveSymbols(MoveOp op, SymbolTableCollection &symbols,
                                ModelOp src, ModelOp dst) {
  if (src.getArch() != dst.getArch())
    return op.emitOpError() << "source @" << src.getSymName() << " and target @"
                            << dst.getSymName()
                            << " are not layouts of the same model: their "
                               "architectures differ";
  ClusterOp cluster = clusterOf(op, symbols);
  return failure(
      failed(verifyLayoutOnCluster(op, cluster, op.getFromMesh(), op.getFrom(),
                                   "source layout: ")) ||
      failed(verifyLayoutOnCluster(op, cluster, op.getToMesh(), op.getTo(),
                                   "target layout: ")));
}

} // namespace

LogicalResult ReallocOp::verify() {
  if (failed(verifyMoveLayouts(*this)))
    return failure();
  if (getSource() == getTarget() && getFromMesh() == getToMesh() &&
      getFrom() == getTo())
    return emitOpError() << "moves @" << getSource()
                         << " to the layout it already has";
  return success();
}

LogicalResult ReallocOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto src = lookupModel(*this, symbols, getSourceAttr());
  auto dst = lookupModel(*this, symbols, getTargetAttr());
  if (failed(src) || failed(dst))
    return failure();
  return verifyMoveSymbols(*this, symbols, *src, *dst);
}

LogicalResult WeightUpdateOp::verify() {
  if (failed(verifyMoveLayouts(*this)))
    return failure();
  if (failed(checkRange(*this, "version_lag", int64_t(getVersionLag()), 1,
                        kMaxStaleness)))
    return failure();
  if (auto alg = (*this)->getParentOfType<AlgorithmOp>();
      alg && getVersionLag() > alg.getStaleness())
    return emitOpError() << "lets the generator lag " << getVersionLag()
                         << " versions, but its algorithm's staleness is "
                         << alg.getStaleness();
  if (getFromMesh() == getToMesh() && getFrom().getDp() == getTo().getDp() &&
      getFrom().getTp() == getTo().getTp() &&
      getFrom().getPp() == getTo().getPp())
    return emitOpError() << "copies @" << getSource()
                         << " into the layout it already has; a generator "
                            "in the trainer's layout needs no update";
  return success();
}

LogicalResult WeightUpdateOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto src = lookupModel(*this, symbols, getSourceAttr());
  auto dst = lookupModel(*this, symbols, getTargetAttr());
  if (failed(src) || failed(dst))
    return failure();
  if (!src->getTrainable())
    return emitOpError() << "updates from @" << src->getSymName()
                         << ", which is not trainable; its weights never "
                            "change";
  return verifyMoveSymbols(*this, symbols, *src, *dst);
}

namespace {

template <typename HostMoveOp>
LogicalResult verifyHostMove(HostMoveOp op, SymbolTableCollection &symbols) {
  auto m = lookupModel(op, symbols, op.getModelAttr());
  if (failed(m))
    return failure();
  if (failed(verifyLayout(op, op.getMesh(), op.getStrategy())))
    return failure();
  if (!op.getStrategy().getOffload())
    return op.emitOpError() << "needs a strategy with offload = true";
  if (m->getTrainable())
    return op.emitOpError() << "moves @" << m->getSymName()
                            << ", which is trainable; only frozen models "
                               "rest in host memory";
  return verifyLayoutOnCluster(op, clusterOf(op, symbols), op.getMesh(),
                               op.getStrategy());
}

} // namespace

LogicalResult OnloadOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyHostMove(*this, symbols);
}

LogicalResult OffloadOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyHostMove(*this, symbols);
}

LogicalResult TransferOp::verify() {
  for (auto [mesh, dp] :
       {std::pair(getFrom(), getFromDp()), std::pair(getTo(), getToDp())})
    if (mesh.getSize() % int64_t(dp))
      return emitOpError() << "dp " << dp << " does not divide the "
                           << mesh.getSize() << " GPUs of its mesh";
  if (getFrom() == getTo() && getFromDp() == getToDp())
    return emitOpError() << "moves a tensor to the layout it is already in";
  // The lowering sends the rows to its consumers' layout: they run there.
  for (Operation *user : getResult().getUsers()) {
    auto mesh = user->getAttrOfType<MeshAttr>("mesh");
    auto st = user->getAttrOfType<StrategyAttr>("strategy");
    if (isModelCall(user) && mesh && st &&
        (mesh != getTo() || st.getDp() != int64_t(getToDp())))
      return emitOpError() << "moves rows to " << getTo() << " dp " << getToDp()
                           << ", but '" << user->getName() << "' reads them on "
                           << mesh << " dp " << st.getDp();
  }
  return success();
}
