//===- MLIRGenFn.cpp - function bodies to the rlhf dialect ----------------===//
//
// Elementwise arithmetic becomes `arith` and `math` ops on tensors (a scalar
// meeting a tensor is splat first, as arith wants one type); comparisons
// are `arith.cmpf` made 0/1 by `arith.uitofp`; the rest are rlhf ops
// (RLHFFnOps.td).
//
//===----------------------------------------------------------------------===//

#include "MLIRGenFn.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "rlhf/IR/RLHFOps.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace rlhfc;
namespace r = mlir::rlhf;
using sema::FnOp;
using sema::FnRank;

namespace {

class FnGen {
public:
  FnGen(OpBuilder &b) : b(b), ctx(b.getContext()) {}

  void run(Region &region, const sema::FnBody &body, TypeRange inputs) {
    Location unknown = UnknownLoc::get(ctx);
    Block *block = new Block();
    region.push_back(block);
    for (Type t : inputs)
      block->addArgument(r::fnValueType(cast<RankedTensorType>(t)), unknown);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(block);
    vals.assign(body.ops.size(), Value());
    for (size_t i = 0; i < body.ops.size(); ++i) {
      const FnOp &op = body.ops[i];
      Location loc = op.loc ? Location(op.loc) : unknown;
      vals[i] = op.op == "input" ? block->getArgument(unsigned(op.number))
                                 : gen(op, loc);
    }
    SmallVector<Value> outs;
    for (auto &[name, id] : body.outputs)
      outs.push_back(vals[size_t(id)]);
    b.create<r::YieldOp>(unknown, outs);
  }

private:
  Value arg(const FnOp &op, size_t i) { return vals[size_t(op.args[i])]; }
  Type typeOf(FnRank rank) {
    return r::fnValueType(ctx, int64_t(rank), rank == FnRank::Tokens);
  }

  /// `vs` brought to one type: scalars splat like the first tensor.
  SmallVector<Value> common(ArrayRef<Value> vs, Location loc) {
    Value ref;
    for (Value v : vs)
      if (isa<RankedTensorType>(v.getType()) && !ref)
        ref = v;
    SmallVector<Value> out;
    for (Value v : vs)
      out.push_back(ref && v.getType() != ref.getType()
                        ? b.create<r::SplatOp>(loc, ref.getType(), v, ref)
                        : v);
    return out;
  }

  Value zeroLike(Value v, Location loc) {
    Value zero = b.create<arith::ConstantOp>(loc, b.getF64FloatAttr(0.0));
    return isa<RankedTensorType>(v.getType())
               ? Value(b.create<r::SplatOp>(loc, v.getType(), zero, v))
               : zero;
  }

  Value gen(const FnOp &op, Location loc) {
    StringRef name = op.op;
    if (name == "const")
      return b.create<arith::ConstantOp>(loc, b.getF64FloatAttr(op.number));
    if (name == "running_mean" || name == "running_std")
      return b.create<r::RunningMomentOp>(
          loc, b.getF64Type(),
          name == "running_mean" ? r::ReduceStat::mean : r::ReduceStat::std,
          arg(op, 0));
    if (name == "adaptive_kl")
      return b.create<r::AdaptiveKlOp>(loc, b.getF64FloatAttr(op.control.init),
                                       b.getF64FloatAttr(op.control.target),
                                       b.getF64FloatAttr(op.control.horizon));
    if (name == "adaptive_entropy")
      return b.create<r::AdaptiveEntropyOp>(
          loc, b.getF64FloatAttr(op.control.init),
          b.getF64FloatAttr(op.control.target),
          b.getF64FloatAttr(op.control.delta),
          b.getF64FloatAttr(op.control.max), b.getF64FloatAttr(op.control.min));
    if (name == "neg")
      return b.create<arith::NegFOp>(loc, arg(op, 0));
    if (name == "exp")
      return b.create<math::ExpOp>(loc, arg(op, 0));
    if (name == "log")
      return b.create<math::LogOp>(loc, arg(op, 0));
    if (name == "log1p")
      return b.create<math::Log1pOp>(loc, arg(op, 0));
    if (name == "expm1")
      return b.create<math::ExpM1Op>(loc, arg(op, 0));
    if (name == "sqrt")
      return b.create<math::SqrtOp>(loc, arg(op, 0));
    if (name == "abs")
      return b.create<math::AbsFOp>(loc, arg(op, 0));
    if (name == "sigmoid")
      return b.create<r::SigmoidOp>(loc, arg(op, 0));
    if (name == "softplus")
      return b.create<r::SoftplusOp>(loc, arg(op, 0));
    if (name == "stop_gradient")
      return b.create<r::StopGradientOp>(loc, arg(op, 0));
    if (std::optional<arith::CmpFPredicate> pred =
            llvm::StringSwitch<std::optional<arith::CmpFPredicate>>(name)
                .Case("lt", arith::CmpFPredicate::OLT)
                .Case("le", arith::CmpFPredicate::OLE)
                .Case("gt", arith::CmpFPredicate::OGT)
                .Case("ge", arith::CmpFPredicate::OGE)
                .Case("eq", arith::CmpFPredicate::OEQ)
                .Case("ne", arith::CmpFPredicate::UNE)
                .Default(std::nullopt)) {
      auto xy = common({arg(op, 0), arg(op, 1)}, loc);
      Value c = b.create<arith::CmpFOp>(loc, *pred, xy[0], xy[1]);
      return b.create<arith::UIToFPOp>(loc, xy[0].getType(), c);
    }
    if (name == "add" || name == "sub" || name == "mul" || name == "div" ||
        name == "min" || name == "max") {
      auto xy = common({arg(op, 0), arg(op, 1)}, loc);
      if (name == "add")
        return b.create<arith::AddFOp>(loc, xy[0], xy[1]);
      if (name == "sub")
        return b.create<arith::SubFOp>(loc, xy[0], xy[1]);
      if (name == "mul")
        return b.create<arith::MulFOp>(loc, xy[0], xy[1]);
      if (name == "div")
        return b.create<arith::DivFOp>(loc, xy[0], xy[1]);
      if (name == "min")
        return b.create<arith::MinimumFOp>(loc, xy[0], xy[1]);
      return b.create<arith::MaximumFOp>(loc, xy[0], xy[1]);
    }
    if (name == "where") {
      auto cab = common({arg(op, 0), arg(op, 1), arg(op, 2)}, loc);
      Value cond = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNE,
                                           cab[0], zeroLike(cab[0], loc));
      return b.create<arith::SelectOp>(loc, cond, cab[1], cab[2]);
    }
    if (name == "clamp") {
      auto x = common({arg(op, 0), arg(op, 1), arg(op, 2)}, loc);
      return b.create<r::ClampOp>(loc, x[0], x[1], x[2]);
    }
    if (name == "broadcast")
      return b.create<r::BroadcastOp>(loc, arg(op, 1).getType(), arg(op, 0),
                                      arg(op, 1));
    if (name == "last")
      return b.create<r::LastOp>(loc, arg(op, 0));
    if (name == "next")
      return b.create<r::NextOp>(loc, arg(op, 0),
                                 op.args.size() > 1 ? arg(op, 1) : Value());
    if (name == "rcumsum")
      return b.create<r::DiscountedCumsumOp>(loc, arg(op, 0), arg(op, 1),
                                             arg(op, 2));
    if (name == "mask_of")
      return b.create<r::MaskOfOp>(loc, typeOf(FnRank::Token), arg(op, 0));
    if (auto out = r::symbolizeModelOutput(name))
      return b.create<r::ModelOutputOp>(loc, typeOf(op.rank), *out, arg(op, 0));
    // over_stat reductions.
    auto [over, stat] = name.split('_');
    auto o = r::symbolizeReduceOver(over);
    auto s = r::symbolizeReduceStat(stat);
    assert(o && s && "Sema emits only the opcodes of FnIR.h");
    Value mask = op.args.size() > 1 ? arg(op, 1) : Value();
    return b.create<r::ReduceOp>(loc, typeOf(op.rank), *o, *s, arg(op, 0), mask,
                                 op.group, op.correction);
  }

  OpBuilder &b;
  MLIRContext *ctx;
  std::vector<Value> vals;
};

} // namespace

void rlhfc::buildFnRegion(OpBuilder &b, Region &region,
                          const sema::FnBody &body, TypeRange inputs) {
  FnGen(b).run(region, body, inputs);
}
