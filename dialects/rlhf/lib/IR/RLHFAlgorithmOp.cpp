//===- RLHFAlgorithmOp.cpp - rlhf.algorithm and its verifiers -------------===//
//
// The iteration as a whole: its settings, the models it offloads, the
// meshes of its transfers, and the held-out dataset it evaluates on.
//
//===----------------------------------------------------------------------===//

#include "Verifiers.h"
#include "rlhf/IR/RLHFOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::rlhf;
using namespace mlir::rlhf::verifiers;

namespace {

/// An offloaded model rests in host memory in its call's layout, so it has
/// exactly that one call and nothing else (an EMA) writes it.
LogicalResult verifyOffloadedModels(AlgorithmOp alg) {
  llvm::StringMap<int> calls, offloaded, written;
  for (Operation &op : alg.getBodyBlock()) {
    if (auto ema = dyn_cast<EmaOp>(op))
      if (ema.getTargetAttr())
        ++written[ema.getTarget()];
    auto model = op.getAttrOfType<FlatSymbolRefAttr>("model");
    // Nested ops are verified after this: one without its model fails then.
    if (!isModelCall(&op) || !model)
      continue;
    StringRef m = model.getValue();
    ++calls[m];
    auto st = op.getAttrOfType<StrategyAttr>("strategy");
    if (st && st.getOffload())
      ++offloaded[m];
  }
  for (auto &[m, n] : offloaded) {
    if (calls[m] != 1)
      return alg.emitOpError()
             << "offloads @" << m << ", which has " << calls[m]
             << " calls; only a model with one call can "
                "rest in host memory";
    if (written.count(m))
      return alg.emitOpError() << "offloads @" << m
                               << ", which an rlhf.ema updates; its host copy "
                                  "would go stale";
  }
  return success();
}

/// The eval dataset stands in for the one the iteration loads: the same
/// fields, none wider, and batches no larger, so the plan's layouts and
/// memory hold for it.
LogicalResult verifyEvalDataset(AlgorithmOp alg,
                                SymbolTableCollection &symbols) {
  if (!alg.getEval())
    return success();
  auto eval =
      symbols.lookupNearestSymbolFrom<DatasetOp>(alg, alg.getEvalAttr());
  if (!eval)
    return alg.emitOpError()
           << "eval '" << *alg.getEval() << "' does not name an rlhf.dataset";
  auto loads = alg.getBodyBlock().getOps<LoadOp>();
  if (loads.empty())
    return alg.emitOpError()
           << "evaluates on @" << eval.getSymName()
           << " in place of the dataset the iteration loads, but it loads none";
  for (LoadOp load : loads) {
    auto ds =
        symbols.lookupNearestSymbolFrom<DatasetOp>(alg, load.getDatasetAttr());
    if (!ds)
      continue; // the load reports it
    RecordType want = ds.getBatchType(), have = eval.getBatchType();
    for (auto [name, type] : llvm::zip(want.getNames(), want.getTypes())) {
      RankedTensorType t = have.getFieldType(name.getValue());
      if (!t || t.getElementType() != type.getElementType() ||
          t.getEncoding() != type.getEncoding() ||
          t.getRank() != type.getRank())
        return alg.emitOpError()
               << "eval dataset @" << eval.getSymName() << " lacks field '"
               << name.getValue() << "' as " << type << " of @"
               << ds.getSymName();
      if (t.getDimSize(0) > type.getDimSize(0) ||
          (t.getRank() > 1 && t.getDimSize(1) > type.getDimSize(1)))
        return alg.emitOpError()
               << "eval dataset @" << eval.getSymName() << "'s field '"
               << name.getValue() << "' (" << t << ") exceeds @"
               << ds.getSymName() << "'s (" << type
               << "), which the plan is priced for";
    }
  }
  // An eval batch's samples replace a generate's rows in the plan.
  const int64_t evalRows =
      eval.getBatchType().getTypes().empty()
          ? 0
          : eval.getBatchType().getTypes().front().getDimSize(0);
  for (GenerateOp g : alg.getBodyBlock().getOps<GenerateOp>()) {
    auto rec = dyn_cast<RecordType>(g.getResult().getType());
    if (!rec || rec.getTypes().empty() || !rec.getTypes().front().getRank())
      continue;
    const int64_t rows = rec.getTypes().front().getDimSize(0);
    if (evalRows * int64_t(alg.getEvalSamples()) > rows)
      return alg.emitOpError()
             << "draws " << alg.getEvalSamples() << " samples of each of the "
             << evalRows << " prompts of an @" << eval.getSymName()
             << " batch, more than the " << rows
             << " rows the plan prices generate @" << g.getModel() << " for";
  }
  return success();
}

} // namespace

LogicalResult AlgorithmOp::verify() {
  if (failed(checkRange(*this, "steps", int64_t(getSteps()), 1, kMaxSteps)) ||
      failed(checkRange(*this, "seed", int64_t(getSeed()), 0, kMaxSteps)) ||
      failed(checkRange(*this, "save_interval", int64_t(getSaveInterval()), 0,
                        kMaxSteps)) ||
      failed(checkRange(*this, "staleness", int64_t(getStaleness()), 0,
                        kMaxStaleness)) ||
      failed(checkRange(*this, "eval_interval", int64_t(getEvalInterval()), 0,
                        kMaxSteps)) ||
      failed(checkRange(*this, "eval_samples", int64_t(getEvalSamples()), 1,
                        kMaxSamples)))
    return failure();
  if (!getEval() && getEvalInterval())
    return emitOpError() << "has an eval_interval but no eval dataset";
  if (!getEval() && getEvalSamples() != 1)
    return emitOpError() << "has eval samples but no eval dataset";
  if (getBodyBlock().getNumArguments())
    return emitOpError() << "body takes no arguments; an iteration starts "
                            "from its loads";
  return verifyOffloadedModels(*this);
}

ClusterOp AlgorithmOp::getClusterOp() {
  return SymbolTable::lookupNearestSymbolFrom<ClusterOp>(*this,
                                                         getClusterAttr());
}

LogicalResult AlgorithmOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto cluster =
      symbols.lookupNearestSymbolFrom<ClusterOp>(*this, getClusterAttr());
  if (!cluster)
    return emitOpError() << "'" << getCluster()
                         << "' does not name an rlhf.cluster";
  // Transfers name no symbol to check their meshes from.
  for (auto t : getBodyBlock().getOps<TransferOp>())
    for (MeshAttr mesh : {t.getFrom(), t.getTo()})
      if (failed(verifyMeshOnCluster(t, cluster, mesh)))
        return failure();
  return verifyEvalDataset(*this, symbols);
}
