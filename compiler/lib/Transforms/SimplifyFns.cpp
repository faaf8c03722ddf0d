//===- SimplifyFns.cpp - rlhf-simplify-fns --------------------------------===//

#include "rlhfc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "rlhf/IR/RLHFOps.h"

#include <cstdio>

namespace rlhfc {
#define GEN_PASS_DEF_RLHFSIMPLIFYFNS
#include "rlhfc/Transforms/Passes.h.inc"
} // namespace rlhfc

using namespace mlir;
namespace r = mlir::rlhf;

namespace {

struct SimplifyFns : rlhfc::impl::RLHFSimplifyFnsBase<SimplifyFns> {
  LogicalResult initialize(MLIRContext *ctx) override {
    RewritePatternSet set(ctx);
    for (Dialect *d : ctx->getLoadedDialects())
      d->getCanonicalizationPatterns(set);
    for (RegisteredOperationName op : ctx->getRegisteredOperations())
      op.getCanonicalizationPatterns(set, ctx);
    patterns = FrozenRewritePatternSet(std::move(set));
    return success();
  }

  void runOnOperation() override {
    SmallVector<Operation *> owners;
    getOperation().walk([&](Operation *op) {
      if (isa<r::ComputeOp, r::TrainStepOp>(op) && !op->getRegion(0).empty())
        owners.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : owners) {
      // Folding exposes shared subexpressions and CSE exposes dead code, so
      // alternate until nothing changes (a few rounds at most).
      for (int round = 0; round < 4; ++round) {
        bool folded = false, shared = false;
        if (failed(applyPatternsAndFoldGreedily(
                op->getRegion(0), patterns, GreedyRewriteConfig(), &folded))) {
          op->emitError("function body did not settle under folding");
          return signalPassFailure();
        }
        DominanceInfo dom(op);
        eliminateCommonSubExpressions(rewriter, dom, op, &shared);
        if (!folded && !shared)
          break;
      }
      // log(0), sqrt(-1), exp(1000): a constant that is not a finite number
      // would poison the batch silently, as a division by zero would.
      WalkResult bad = op->getRegion(0).walk([&](arith::ConstantOp c) {
        auto f = dyn_cast<FloatAttr>(c.getValue());
        if (!f || f.getValue().isFinite())
          return WalkResult::advance();
        Location loc = isa<UnknownLoc>(c.getLoc()) ? op->getLoc() : c.getLoc();
        emitError(loc) << "this expression of constants is "
                       << (f.getValue().isNaN()        ? "not a number"
                           : f.getValue().isNegative() ? "-inf"
                                                       : "inf")
                       << " (a log of a non-positive number, a square root of "
                          "a negative one, an exp that overflows); fix the "
                          "constant";
        return WalkResult::interrupt();
      });
      if (bad.wasInterrupted())
        return signalPassFailure();
      // What folding leaves unfolded outside its domain: sqrt(-1).
      bad = op->getRegion(0).walk([&](Operation *m) {
        if (!isa<math::SqrtOp, math::RsqrtOp, math::LogOp, math::Log1pOp>(m))
          return WalkResult::advance();
        auto c = m->getOperand(0).getDefiningOp<arith::ConstantOp>();
        auto f = c ? dyn_cast<FloatAttr>(c.getValue()) : FloatAttr();
        if (!f)
          return WalkResult::advance();
        double x = f.getValueAsDouble();
        if (isa<math::SqrtOp>(m)    ? x >= 0
            : isa<math::Log1pOp>(m) ? x > -1
                                    : x > 0)
          return WalkResult::advance();
        char text[32];
        std::snprintf(text, sizeof text, "%g", x);
        m->emitError() << "the "
                       << (isa<math::LogOp>(m)     ? "log"
                           : isa<math::Log1pOp>(m) ? "log1p"
                           : isa<math::SqrtOp>(m)  ? "square root"
                                                   : "inverse square root")
                       << " of the constant " << text
                       << " is not a finite number; fix the constant";
        return WalkResult::interrupt();
      });
      if (bad.wasInterrupted())
        return signalPassFailure();
    }
  }

  FrozenRewritePatternSet patterns;
};

} // namespace
