//===- SimplifyFns.cpp - rlhf-simplify-fns --------------------------------===//

#include "rlhfc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "rlhf/IR/RLHFOps.h"

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
    }
  }

  FrozenRewritePatternSet patterns;
};

} // namespace
