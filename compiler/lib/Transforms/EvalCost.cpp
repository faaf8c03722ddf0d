//===- EvalCost.cpp - the plan's price of one eval batch ------------------===//
//
// Evaluation runs the eval slice once per batch of the held-out dataset:
// its calls at that batch, one greedy sample per prompt (or eval_samples
// sampled ones), where the plan placed them (a generator that runs ahead:
// its trainer's layout), a validation loss as its train call's forward,
// and its model moves there and back. The price is the
// slice's calls simulated as one iteration of their own, plus the moves, which
// the runtime makes before the calls and undoes after them (EvalSlice.h).
//
//===----------------------------------------------------------------------===//

#include "EvalSlice.h"
#include "rlhfc/CostModel/FromIR.h"
#include "rlhfc/Planner/Planner.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace rlhfc;
using namespace rlhfc::lowering;
namespace r = mlir::rlhf;

/// Rows of an op's first result (a record's first field); of a train
/// step, of its first input (its result is the loss and metrics).
static int64_t rowsOf(Operation *op) {
  Value v = op->getResult(0);
  if (auto ts = dyn_cast<r::TrainStepOp>(op); ts && !ts.getInputs().empty())
    v = ts.getInputs().front();
  Type t = v.getType();
  if (auto rec = dyn_cast<r::RecordType>(t))
    t = rec.getTypes().front();
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt && rt.getRank() > 0 ? rt.getDimSize(0) : 1;
}

FailureOr<double> rlhfc::lowering::evalBatchTime(r::AlgorithmOp alg,
                                                 const EvalSlice &es,
                                                 const cost::Calibration &cal) {
  auto module = alg->getParentOfType<ModuleOp>();
  auto ds = module.lookupSymbol<r::DatasetOp>(*alg.getEval());
  if (!ds)
    return alg.emitError() << "eval dataset @" << *alg.getEval()
                           << " is not declared";
  const int64_t batch =
      cast<RankedTensorType>(
          cast<r::RecordType>(ds.getBatchType()).getTypes().front())
          .getDimSize(0);
  const int64_t samples = alg.getEvalSamples();
  auto full = plan::buildProblem(alg, cal);
  if (failed(full))
    return failure();
  const plan::Problem &p = *full;
  llvm::StringMap<Placement> initial = initialPlacements(alg);
  const llvm::StringSet<> ahead = modelsRunningAhead(alg);

  // The slice's calls, renumbered, at the eval batch.
  plan::Problem q;
  q.hw = p.hw;
  q.gpus = p.gpus;
  q.nodes = p.nodes;
  q.models = p.models;
  q.parked = p.parked;
  q.memoryLimit = p.memoryLimit;
  llvm::DenseSet<Operation *> inSlice(es.order.begin(), es.order.end());
  std::vector<int> renumbered(p.calls.size(), -1);
  for (size_t c = 0; c < p.calls.size(); ++c) {
    const plan::Call &call = p.calls[c];
    if (!inSlice.contains(call.op))
      continue;
    plan::Call e = call;
    const double rows = double(rowsOf(call.op));
    const double scale = rows > 0 ? double(batch * samples) / rows : 1.0;
    e.deps.clear();
    e.depValues.clear();
    for (auto [i, dep] : llvm::enumerate(call.deps))
      if (renumbered[size_t(dep.first)] >= 0) {
        e.deps.push_back({renumbered[size_t(dep.first)], dep.second * scale});
        e.depValues.push_back(call.depValues[i]);
      }
    e.outBytes *= scale;
    e.stale = 0;
    std::vector<plan::Candidate> cands;
    if (call.host) {
      // Host time is linear in the rows; evaluation scores once per batch.
      e.hostTime *= scale / std::max(1.0, r::expectedRounds(call.op));
    } else {
      e.shape.batch = batch * samples;
      e.shape.repeats = 1;
      if (isa<r::GenerateOp>(call.op))
        e.shape.greedy = samples == 1 || e.shape.greedy;
      // A generator that runs ahead is evaluated where its trainer starts,
      // as the lowering runs it.
      cost::Strategy s = p.cands[c].front().s;
      auto g = dyn_cast<r::GenerateOp>(call.op);
      if (g && ahead.contains(g.getModel())) {
        const Placement &at = initial.lookup(g.getModel());
        if (at.mesh)
          s = cost::strategyFrom(at.mesh, at.strategy);
      }
      if (e.shape.kind == cost::CallKind::Train) {
        // A validation loss: the train call's forward over its rows (each
        // sequence the loss runs the model on), micro-batched as it trains.
        s.microBatches *= std::max<int64_t>(1, e.shape.minibatches);
        // Data rows, not samples.
        e.shape.kind = cost::CallKind::Inference;
        e.shape.batch = batch * std::max<int64_t>(1, e.shape.forwards);
        e.shape.forwards = 1;
        e.shape.minibatches = e.shape.epochs = 1;
        e.shape.trainable = false;
      }
      e.pinned = s;
      cands.push_back(plan::Candidate::priced(p.models[size_t(call.model)].arch,
                                              p.hw, s, e.shape));
    }
    renumbered[c] = int(q.calls.size());
    q.calls.push_back(std::move(e));
    q.cands.push_back(std::move(cands));
  }
  plan::Assignment a(q.calls.size(), -1);
  for (size_t c = 0; c < q.calls.size(); ++c)
    if (!q.calls[c].host)
      a[c] = 0;
  double seconds = plan::simulate(q, a, /*iterations=*/1).makespan;

  // Reallocations there and back; an onload is priced in its offloaded
  // call's candidate.
  for (Operation *op : es.moves)
    if (auto re = dyn_cast<r::ReallocOp>(op)) {
      auto model = module.lookupSymbol<r::ModelOp>(re.getSource());
      if (!model)
        continue;
      seconds += 2 * cost::estimateRealloc(
                         cost::archOf(model), p.hw,
                         cost::strategyFrom(re.getFromMesh(), re.getFrom()),
                         cost::strategyFrom(re.getToMesh(), re.getTo()))
                         .time;
    }
  return seconds;
}
