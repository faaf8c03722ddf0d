//===- EvalSlice.cpp - the ops held-out evaluation runs -------------------===//
//
// Evaluation reports the rewards of the policy's samples on held-out
// prompts, as verl's validation does: the scores an iteration computes
// first from what a generate made. It runs their backward slice (the load,
// the generate, transfers, reward model inference, the scoring) and the
// model moves before them, in the iteration's order, so that each call
// runs in the layout the plan gave it. Penalties and advantages built on a
// score, and a critic's values, are not rewards. A train step fed by the
// data alone (SFT, DPO, a reward model) reports its loss instead, run
// forward on the held-out rows, as OpenRLHF's validation loss.
//
//===----------------------------------------------------------------------===//

#include "EvalSlice.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace rlhfc::lowering;
namespace r = mlir::rlhf;

static bool isScore(Type t) {
  return r::getTensorKind(t) == r::TensorKind::score;
}

/// The score field of a record type, or "".
static std::string scoreField(Type t) {
  auto rec = dyn_cast<r::RecordType>(t);
  if (!rec)
    return "";
  for (auto [name, type] : llvm::zip(rec.getNames(), rec.getTypes()))
    if (isScore(type))
      return name.getValue().str();
  return "";
}

/// The backward slice of `root` inside its block, or failure when it holds
/// an op evaluation cannot repeat (a train step other than the root, a
/// filter, an ema).
static LogicalResult sliceOf(Operation *root,
                             llvm::SmallPtrSetImpl<Operation *> &slice,
                             bool &generated) {
  SmallVector<Operation *> todo = {root};
  slice.insert(root);
  while (!todo.empty()) {
    Operation *op = todo.pop_back_val();
    if (isa<r::GenerateOp>(op))
      generated = true;
    else if (!isa<r::LoadOp, r::FieldOp, r::TransferOp, r::InferenceOp,
                  r::ComputeOp>(op) &&
             !(op == root && isa<r::TrainStepOp>(op)))
      return failure();
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp();
          def && def->getBlock() == root->getBlock() &&
          slice.insert(def).second)
        todo.push_back(def);
  }
  return success();
}

FailureOr<EvalSlice> rlhfc::lowering::evalSlice(r::AlgorithmOp alg) {
  ModuleOp module = alg->getParentOfType<ModuleOp>();
  EvalSlice es;
  llvm::SmallPtrSet<Operation *, 16> slice;
  for (Operation &op : alg.getBodyBlock()) {
    std::string label;
    if (auto ts = dyn_cast<r::TrainStepOp>(op)) {
      llvm::SmallPtrSet<Operation *, 16> mine;
      bool generated = false;
      if (failed(sliceOf(&op, mine, generated)) || generated)
        continue;
      slice.insert(mine.begin(), mine.end());
      es.scores.push_back({&op, "", ts.getModel().str()});
      continue;
    }
    if (auto c = dyn_cast<r::ComputeOp>(op)) {
      // The runtime's built-in rewards log `reward` in training too.
      label = c.getKind() == r::ComputeKind::fn ? c.getFnAttr().getValue().str()
                                                : std::string("reward");
    } else if (auto in = dyn_cast<r::InferenceOp>(op)) {
      auto model = module ? module.lookupSymbol<r::ModelOp>(in.getModel())
                          : r::ModelOp();
      if (!model || model.getTrainable()) // a critic's values
        continue;
      label = ("score/" + in.getModel()).str();
    } else {
      continue;
    }
    std::string field = scoreField(op.getResult(0).getType());
    if (field.empty() || llvm::any_of(op.getOperandTypes(), isScore))
      continue;
    llvm::SmallPtrSet<Operation *, 16> mine;
    bool generated = false;
    if (failed(sliceOf(&op, mine, generated)) || !generated)
      continue;
    slice.insert(mine.begin(), mine.end());
    es.scores.push_back({&op, field, label});
  }
  if (es.scores.empty())
    return alg.emitError()
           << "eval @" << *alg.getEval()
           << " needs a reward of generated samples or a train step fed by "
              "the data alone, but the iteration has neither";
  Operation *last = nullptr;
  for (Operation &op : alg.getBodyBlock())
    if (slice.contains(&op))
      last = &op;
  for (Operation &op : alg.getBodyBlock()) {
    if (slice.contains(&op)) {
      es.order.push_back(&op);
    } else if (isa<r::ReallocOp, r::OnloadOp, r::OffloadOp>(op) &&
               op.isBeforeInBlock(last)) {
      es.order.push_back(&op);
      es.moves.push_back(&op);
    }
    if (&op == last)
      break;
  }
  return es;
}

llvm::StringSet<> rlhfc::lowering::modelsRunningAhead(r::AlgorithmOp alg) {
  llvm::StringSet<> updated;
  for (auto up : alg.getBodyBlock().getOps<r::WeightUpdateOp>())
    updated.insert(up.getSource());
  return updated;
}

llvm::StringMap<Placement>
rlhfc::lowering::initialPlacements(r::AlgorithmOp alg) {
  const llvm::StringSet<> ahead = modelsRunningAhead(alg);
  llvm::StringMap<Placement> at;
  for (Operation &op : alg.getBodyBlock()) {
    if (auto re = dyn_cast<r::ReallocOp>(op)) {
      at.try_emplace(re.getSource(), Placement{re.getFromMesh(), re.getFrom()});
      continue;
    }
    if (!r::isModelCall(&op))
      continue;
    auto model = op.getAttrOfType<FlatSymbolRefAttr>("model").getValue();
    auto mesh = op.getAttrOfType<r::MeshAttr>("mesh");
    auto st = op.getAttrOfType<r::StrategyAttr>("strategy");
    if ((isa<r::GenerateOp>(op) && ahead.contains(model)) || !mesh || !st)
      continue;
    at.try_emplace(model, Placement{mesh, st});
  }
  return at;
}
