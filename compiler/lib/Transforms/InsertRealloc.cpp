//===- InsertRealloc.cpp - rlhf-insert-realloc ----------------------------===//

#include "PassUtils.h"
#include "rlhfc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace rlhfc {
#define GEN_PASS_DEF_RLHFINSERTREALLOC
#include "rlhfc/Transforms/Passes.h.inc"
} // namespace rlhfc

using namespace mlir;
using namespace rlhfc;
namespace r = mlir::rlhf;

namespace {

struct Layout {
  r::MeshAttr mesh;
  r::StrategyAttr strategy;
  /// Parameter layout: micro-batching and recomputation do not move weights,
  /// and sequence-parallel ranks hold weights as data-parallel ones do (dp
  /// major, then sp), so only dp*sp counts.
  bool sameParams(const Layout &o) const {
    return mesh == o.mesh &&
           strategy.getDp() * strategy.getSp() ==
               o.strategy.getDp() * o.strategy.getSp() &&
           strategy.getTp() == o.strategy.getTp() &&
           strategy.getPp() == o.strategy.getPp();
  }
};

struct InsertRealloc : rlhfc::impl::RLHFInsertReallocBase<InsertRealloc> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (auto alg : module.getOps<r::AlgorithmOp>()) {
      auto cluster = alg.getClusterOp();
      if (!cluster)
        continue;
      cost::Hardware hw = cost::hardwareOf(cluster, {});
      // The movements follow from the calls' layouts: an earlier run's are
      // replaced, not added to (a second run doubled every realloc, each
      // moving from a layout the model had already left).
      for (Operation &op : llvm::make_early_inc_range(alg.getBodyBlock()))
        if (isa<r::ReallocOp, r::WeightUpdateOp, r::OnloadOp, r::OffloadOp>(op))
          op.erase();
      auto layoutOf = [](Operation &op) -> std::optional<Layout> {
        auto mesh = op.getAttrOfType<r::MeshAttr>("mesh");
        auto st = op.getAttrOfType<r::StrategyAttr>("strategy");
        if (!mesh || !st)
          return std::nullopt;
        return Layout{mesh, st};
      };
      auto modelOf = [](Operation &op) {
        return op.getAttrOfType<FlatSymbolRefAttr>("model");
      };
      // Under staleness, a generate in a layout other than its trainer's
      // keeps its own copy of the weights (plan::ownsWeightCopy): no realloc
      // into or out of it, and a weight update after the trainer's last call.
      llvm::SetVector<Operation *> owning;
      llvm::StringMap<Operation *> trainerLast;
      auto readsModelCall = [](Operation &op) {
        return llvm::any_of(op.getOperands(), [](Value v) {
          Operation *def = v.getDefiningOp();
          while (def && isa<r::FieldOp, r::TransferOp>(def))
            def = def->getOperand(0).getDefiningOp();
          return def && r::isModelCall(def);
        });
      };
      auto trainerOf = [&](Operation &gen) -> Operation * {
        Operation *last = nullptr;
        for (Operation &op : alg.getBodyBlock())
          if (&op != &gen && r::isModelCall(&op) && modelOf(op) == modelOf(gen))
            last = &op;
        return last;
      };
      if (alg.getStaleness() > 0)
        for (auto gen : alg.getBodyBlock().getOps<r::GenerateOp>()) {
          Operation *t = trainerOf(*gen);
          auto gl = layoutOf(*gen);
          auto tl = t ? layoutOf(*t) : std::nullopt;
          if (gen.getStaleness() < 1 || !gl || !tl || readsModelCall(*gen) ||
              gl->strategy.getOffload() || tl->strategy.getOffload() ||
              gl->sameParams(*tl))
            continue;
          owning.insert(gen);
          trainerLast[gen.getModel()] = t;
        }
      // Each model enters the iteration in the layout of its last call
      // (an offloaded one, with a single call, in host memory).
      llvm::StringMap<Layout> current;
      for (Operation &op : alg.getBodyBlock())
        if (r::isModelCall(&op) && !owning.contains(&op))
          if (auto l = layoutOf(op))
            current[modelOf(op).getValue()] = *l;
      OpBuilder b(module.getContext());
      for (Operation *gen : owning) {
        StringRef name = modelOf(*gen).getValue();
        Operation *t = trainerLast.lookup(name);
        Layout from = *layoutOf(*t), to = *layoutOf(*gen);
        auto model = symbols.lookup<r::ModelOp>(name);
        cost::MoveEstimate mv =
            cost::estimateRealloc(cost::archOf(model), hw,
                                  cost::strategyFrom(from.mesh, from.strategy),
                                  cost::strategyFrom(to.mesh, to.strategy));
        b.setInsertionPointAfter(t);
        b.create<r::WeightUpdateOp>(
            t->getLoc(), modelOf(*t),
            b.getI64IntegerAttr(cast<r::GenerateOp>(gen).getStaleness()),
            from.mesh, from.strategy, modelOf(*gen), to.mesh, to.strategy,
            costAttr(module.getContext(), mv.time, mv.movedBytes()));
      }
      for (Operation &op : llvm::make_early_inc_range(alg.getBodyBlock())) {
        if (!r::isModelCall(&op) || owning.contains(&op))
          continue;
        auto l = layoutOf(op);
        if (!l)
          continue;
        StringRef name = modelOf(op).getValue();
        if (l->strategy.getOffload()) {
          // Weights rest in host memory: load them for the call, free after.
          auto model = symbols.lookup<r::ModelOp>(name);
          cost::Arch arch = cost::archOf(model);
          cost::Strategy s = cost::strategyFrom(l->mesh, l->strategy);
          cost::Estimate e =
              cost::estimateCall(arch, hw, s, cost::shapeOf(&op, model));
          b.setInsertionPoint(&op);
          b.create<r::OnloadOp>(
              op.getLoc(), modelOf(op), l->mesh, l->strategy,
              // Bytes: every replica's copy (tp and pp shard it; the
              // largest stage's shard times the GPUs would overcount).
              costAttr(module.getContext(), e.time.load,
                       2.0 * arch.totalParams * double(s.dp * s.sp)));
          b.setInsertionPointAfter(&op);
          b.create<r::OffloadOp>(op.getLoc(), modelOf(op), l->mesh, l->strategy,
                                 r::CostAttr());
          continue;
        }
        Layout &cur = current[name];
        if (cur.sameParams(*l))
          continue;
        auto model = symbols.lookup<r::ModelOp>(name);
        cost::Arch arch = cost::archOf(model);
        cost::MoveEstimate mv = cost::estimateRealloc(
            arch, hw, cost::strategyFrom(cur.mesh, cur.strategy),
            cost::strategyFrom(l->mesh, l->strategy));
        b.setInsertionPoint(&op);
        b.create<r::ReallocOp>(
            op.getLoc(), modelOf(op), cur.mesh, cur.strategy, modelOf(op),
            l->mesh, l->strategy,
            costAttr(module.getContext(), mv.time, mv.movedBytes()));
        cur = *l;
      }
    }
  }
};

} // namespace
