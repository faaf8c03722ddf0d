//===- FilterLoop.cpp - the loop dynamic sampling makes -------------------===//
//
// The ops an rlhf.filter_groups depends on (its backward slice: the batch's
// load, the generate, the scoring, the transfers between them) run once per
// round. Model moves between them stay in the loop and, unless a model's
// moves cancel out, are undone before each further round; moves before its
// first call are hoisted above it, so a round starts where the first did.
//
//===----------------------------------------------------------------------===//

#include "FilterLoop.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace rlhfc::lowering;
namespace r = mlir::rlhf;

FailureOr<FilterLoop> rlhfc::lowering::filterLoop(r::AlgorithmOp alg) {
  FilterLoop fl;
  r::FilterGroupsOp filter;
  for (auto f : alg.getBodyBlock().getOps<r::FilterGroupsOp>()) {
    if (filter)
      return f.emitError("an iteration has at most one rlhf.filter_groups");
    filter = f;
  }
  for (Operation &op : alg.getBodyBlock())
    fl.order.push_back(&op);
  if (!filter)
    return fl;
  // What the filter depends on runs once per round.
  llvm::SmallPtrSet<Operation *, 16> slice;
  SmallVector<Operation *> todo = {filter};
  while (!todo.empty()) {
    Operation *op = todo.pop_back_val();
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp();
          def && def->getBlock() == filter->getBlock() &&
          slice.insert(def).second)
        todo.push_back(def);
  }
  for (Operation *op : slice)
    if (auto load = dyn_cast<r::LoadOp>(op))
      fl.dataset = load.getDataset();
  if (fl.dataset.empty())
    return filter.emitError(
        "rlhf.filter_groups draws further batches, but its values come from "
        "no rlhf.load");
  // Ops between the slice's first op and the filter that are not in it:
  // model moves before the first call are hoisted out of the loop; later
  // ones stay in it and are undone before each further round.
  auto begin = llvm::find_if(fl.order,
                             [&](Operation *op) { return slice.contains(op); });
  auto end = llvm::find(fl.order, filter.getOperation());
  std::vector<Operation *> before(fl.order.begin(), begin), hoisted, loop,
      moves;
  bool called = false;
  for (auto it = begin; it != end; ++it) {
    Operation *op = *it;
    if (slice.contains(op)) {
      called |= r::isModelCall(op) || isa<r::ComputeOp>(op);
      loop.push_back(op);
      continue;
    }
    if (!isa<r::ReallocOp, r::OnloadOp, r::OffloadOp>(op)) {
      InFlightDiagnostic d =
          op->emitError("this op runs between the ops that dynamic sampling "
                        "repeats, but the filter does not depend on it; "
                        "place it after the filter");
      d.attachNote(filter.getLoc()) << "the filter";
      return d;
    }
    if (called) {
      loop.push_back(op);
      moves.push_back(op);
    } else {
      hoisted.push_back(op);
    }
  }
  // A model whose moves in the loop leave it where it was (an offloaded
  // model's onload and offload around its call) needs no undoing.
  auto modelOf = [](Operation *op) {
    return op
        ->getAttrOfType<FlatSymbolRefAttr>(isa<r::ReallocOp>(op) ? "source"
                                                                 : "model")
        .getValue();
  };
  auto state = [](Operation *op, bool after) -> std::string {
    if (auto re = dyn_cast<r::ReallocOp>(op))
      return after
                 ? llvm::formatv("gpu {0} {1}", re.getToMesh(), re.getTo())
                 : llvm::formatv("gpu {0} {1}", re.getFromMesh(), re.getFrom());
    bool on = isa<r::OnloadOp>(op);
    return llvm::formatv("{0} {1} {2}", on == after ? "gpu" : "host",
                         op->getAttrOfType<r::MeshAttr>("mesh"),
                         op->getAttrOfType<r::StrategyAttr>("strategy"));
  };
  llvm::StringMap<SmallVector<Operation *>> movesOf;
  for (Operation *op : moves)
    movesOf[modelOf(op)].push_back(op);
  for (Operation *op : moves) {
    auto &mine = movesOf[modelOf(op)];
    if (state(mine.front(), false) != state(mine.back(), true))
      fl.moves.push_back(op);
  }
  fl.loopStart = loop.front();
  std::vector<Operation *> order = std::move(before);
  order.insert(order.end(), hoisted.begin(), hoisted.end());
  order.insert(order.end(), loop.begin(), loop.end());
  order.insert(order.end(), end, fl.order.end());
  fl.order = std::move(order);
  return fl;
}
