//===- InferShapes.cpp - rlhf-infer-shapes --------------------------------===//

#include "rlhfc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "rlhf/IR/RLHFOps.h"

namespace rlhfc {
#define GEN_PASS_DEF_RLHFINFERSHAPES
#include "rlhfc/Transforms/Passes.h.inc"
} // namespace rlhfc

using namespace mlir;
using namespace rlhfc;
namespace r = mlir::rlhf;

namespace {

struct RecordBuilder {
  MLIRContext *ctx;
  SmallVector<StringAttr> names;
  SmallVector<RankedTensorType> types;

  RecordBuilder &add(StringRef name, ArrayRef<int64_t> shape, Type elt,
                     r::TensorKind kind) {
    names.push_back(StringAttr::get(ctx, name));
    types.push_back(r::getKindedTensorType(ctx, shape, elt, kind));
    return *this;
  }
  r::RecordType get() { return r::RecordType::get(ctx, names, types); }
};

struct InferShapes : rlhfc::impl::RLHFInferShapesBase<InferShapes> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    Type i32 = b.getIntegerType(32), i8 = b.getIntegerType(8),
         f32 = b.getF32Type();
    auto dims = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getShape();
    };
    WalkResult res = module.walk([&](Operation *op) -> WalkResult {
      RecordBuilder rb{ctx, {}, {}};
      Type inferred;
      if (auto g = dyn_cast<r::GenerateOp>(op)) {
        int64_t n = dims(g.getPrompt())[0] * g.getN(),
                p = dims(g.getPrompt())[1];
        int64_t s = p + g.getMaxNewTokens();
        inferred = rb.add("prompt", {n, p}, i32, r::TensorKind::tokens)
                       .add("seq", {n, s}, i32, r::TensorKind::tokens)
                       .add("logprobs", {n, s}, f32, r::TensorKind::logprobs)
                       .add("mask", {n, s}, i8, r::TensorKind::mask)
                       .get();
      } else if (auto i = dyn_cast<r::InferenceOp>(op)) {
        auto model = symbols.lookup<r::ModelOp>(i.getModel());
        if (!model)
          return WalkResult::advance(); // the verifier reports it
        auto d = dims(i.getSeq());
        rb.add("seq", d, i32, r::TensorKind::tokens);
        if (model.getHead() == r::Head::lm)
          rb.add("logprobs", d, f32, r::TensorKind::logprobs);
        else
          rb.add("values", d, f32, r::TensorKind::values)
              .add("score", {d[0]}, f32, r::TensorKind::score);
        inferred = rb.get();
      } else if (isa<r::TrainStepOp>(op)) {
        // The loss's metrics follow the loss in the stats record.
        return WalkResult::advance();
      } else if (auto c = dyn_cast<r::ComputeOp>(op)) {
        // A function's record comes from its signature, sized by Sema.
        if (c.getKind() == r::ComputeKind::fn)
          return WalkResult::advance();
        int64_t n = 1, s = 1;
        for (Value v : c.getInputs()) {
          auto d = dims(v);
          if (r::getTensorKind(v.getType()) == r::TensorKind::answer)
            continue;
          n = std::max(n, d[0]);
          if (d.size() == 2)
            s = std::max(s, d[1]);
        }
        switch (c.getKind()) {
        case r::ComputeKind::exact_match:
        case r::ComputeKind::script_reward:
          rb.add("score", {n}, f32, r::TensorKind::score);
          break;
        case r::ComputeKind::fn:
          break;
        }
        inferred = rb.get();
      } else if (auto f = dyn_cast<r::FieldOp>(op)) {
        inferred = cast<r::RecordType>(f.getRecord().getType())
                       .getFieldType(f.getName());
        if (!inferred) {
          f.emitError() << "record has no field '" << f.getName()
                        << "' after shape inference";
          return WalkResult::interrupt();
        }
      } else if (auto t = dyn_cast<r::TransferOp>(op)) {
        inferred = t.getInput().getType();
      } else if (auto f = dyn_cast<r::FilterGroupsOp>(op)) {
        for (auto [v, kept] : llvm::zip(f.getValues(), f.getKept()))
          kept.setType(r::keptRowsType(cast<r::RecordType>(v.getType()),
                                       f.getDrawnPrompts(),
                                       f.getKeptPrompts()));
        return WalkResult::advance();
      }
      if (inferred && op->getNumResults() == 1)
        op->getResult(0).setType(inferred);
      return WalkResult::advance();
    });
    if (res.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
