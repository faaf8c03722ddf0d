//===- FnCode.cpp - function bodies as runtime fn code --------------------===//
//
// The runtime evaluates a function as a numbered list of ATen-backed ops
// (FnProgram.h). Every MLIR value gets a number in block order; splats and
// uitofp are free there (a scalar broadcasts, a comparison already gives
// 0/1), so they alias their operand.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/Transforms/FnCode.h"

#include "rlhfc/Support/SourcePaths.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
namespace r = mlir::rlhf;

namespace {

class Encoder {
public:
  FailureOr<std::string> run(StringRef name, bool loss, Region &body,
                             ArrayRef<StringRef> outNames,
                             const std::string &callSite) {
    text = ("rlhf.fn " + Twine(callSite.empty() ? 1 : 2) + " " + name +
            (loss ? " loss" : " host"))
               .str();
    if (!callSite.empty())
      text += "\nat " + callSite;
    Block &block = body.front();
    for (BlockArgument a : block.getArguments()) {
      auto t = cast<RankedTensorType>(a.getType());
      def(a, "input " + std::to_string(a.getArgNumber()) + " " +
                 (t.getElementType().isInteger(32) ? "tok"
                  : t.getRank() == 1               ? "f1"
                                                   : "f2"));
    }
    for (Operation &op : block.without_terminator())
      if (failed(encode(op)))
        return failure();
    auto yield = cast<r::YieldOp>(block.getTerminator());
    for (auto [i, v] : llvm::enumerate(yield.getValues()))
      text += "\nout " + outNames[i].str() + " " + ref(v);
    return text;
  }

private:
  std::string ref(Value v) { return "%" + std::to_string(ids.lookup(v)); }
  void def(Value v, const std::string &rhs) {
    int id = next++;
    ids[v] = id;
    text += "\n%" + std::to_string(id) + " = " + rhs;
  }
  static std::string num(double x) {
    char buf[32]; // round-trips the double
    std::snprintf(buf, sizeof buf, "%.17g", x);
    return buf;
  }
  std::string refs(ValueRange vs) {
    std::string s;
    for (Value v : vs)
      s += " " + ref(v);
    return s;
  }

  LogicalResult constant(arith::ConstantOp c) {
    Attribute a = c.getValue();
    if (auto d = dyn_cast<SplatElementsAttr>(a))
      a = d.getSplatValue<Attribute>();
    if (auto f = dyn_cast<FloatAttr>(a))
      def(c, "const " + num(f.getValueAsDouble()));
    else if (auto i = dyn_cast<IntegerAttr>(a))
      def(c, "const " + num(double(i.getValue().getZExtValue())));
    else
      return c.emitOpError("is not a number the runtime can hold");
    return success();
  }

  static const char *compare(arith::CmpFPredicate p) {
    using P = arith::CmpFPredicate;
    switch (p) {
    case P::OLT:
    case P::ULT:
      return "lt";
    case P::OLE:
    case P::ULE:
      return "le";
    case P::OGT:
    case P::UGT:
      return "gt";
    case P::OGE:
    case P::UGE:
      return "ge";
    case P::OEQ:
    case P::UEQ:
      return "eq";
    case P::ONE:
    case P::UNE:
      return "ne";
    default:
      return nullptr;
    }
  }

  /// `x != 0` read only by selects: how MLIRGen writes `where(x, a, b)`,
  /// whose runtime `where` reads x itself.
  static bool isWhereCondition(arith::CmpFOp c) {
    if (c.getPredicate() != arith::CmpFPredicate::UNE ||
        !llvm::all_of(c->getUsers(),
                      [](Operation *u) { return isa<arith::SelectOp>(u); }))
      return false;
    Value zero = c.getRhs();
    if (auto z = zero.getDefiningOp<r::SplatOp>())
      zero = z.getScalar();
    auto k = zero.getDefiningOp<arith::ConstantOp>();
    auto f = k ? dyn_cast<FloatAttr>(k.getValue()) : FloatAttr();
    return f && f.getValueAsDouble() == 0;
  }

  LogicalResult encode(Operation &op) {
    auto unary = [&](const char *name) {
      def(op.getResult(0), name + refs(op.getOperands()));
      return success();
    };
    return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
        .Case([&](arith::ConstantOp c) { return constant(c); })
        .Case([&](r::RunningMomentOp m) {
          def(m, (m.getStat() == r::ReduceStat::mean ? "running_mean "
                                                     : "running_std ") +
                     ref(m.getInput()));
          return success();
        })
        .Case([&](r::AdaptiveEntropyOp c) {
          def(c, "adaptive_entropy " + num(c.getInit().convertToDouble()) +
                     " " + num(c.getTarget().convertToDouble()) + " " +
                     num(c.getDelta().convertToDouble()) + " " +
                     num(c.getMax().convertToDouble()) + " " +
                     num(c.getMin().convertToDouble()));
          return success();
        })
        .Case([&](r::AdaptiveKlOp k) {
          def(k, "adaptive_kl " + num(k.getInit().convertToDouble()) + " " +
                     num(k.getTarget().convertToDouble()) + " " +
                     num(k.getHorizon().convertToDouble()));
          return success();
        })
        .Case([&](r::SplatOp s) {
          ids[s] = ids.lookup(s.getScalar());
          return success();
        })
        .Case([&](arith::UIToFPOp u) {
          ids[u] = ids.lookup(u.getIn());
          return success();
        })
        .Case([&](arith::NegFOp) { return unary("neg"); })
        .Case([&](math::ExpOp) { return unary("exp"); })
        .Case([&](math::LogOp) { return unary("log"); })
        .Case([&](math::Log1pOp) { return unary("log1p"); })
        .Case([&](math::ExpM1Op) { return unary("expm1"); })
        .Case([&](math::SqrtOp) { return unary("sqrt"); })
        .Case([&](math::AbsFOp) { return unary("abs"); })
        .Case([&](r::SigmoidOp) { return unary("sigmoid"); })
        .Case([&](r::SoftplusOp) { return unary("softplus"); })
        .Case([&](r::StopGradientOp) { return unary("stop_gradient"); })
        .Case([&](arith::AddFOp) { return unary("add"); })
        .Case([&](arith::SubFOp) { return unary("sub"); })
        .Case([&](arith::MulFOp) { return unary("mul"); })
        .Case([&](arith::DivFOp) { return unary("div"); })
        .Case([&](arith::MinimumFOp) { return unary("min"); })
        .Case([&](arith::MaximumFOp) { return unary("max"); })
        .Case([&](arith::CmpFOp c) -> LogicalResult {
          if (isWhereCondition(c)) {
            ids[c] = ids.lookup(c.getLhs()); // the selects read the lhs
            return success();
          }
          const char *name = compare(c.getPredicate());
          if (!name)
            return c.emitOpError("has a predicate the runtime lacks");
          return unary(name);
        })
        .Case([&](arith::SelectOp s) {
          // `where` reads a 0/1 condition: a cmpf's, whose `c != 0` form
          // (how MLIRGen writes a where) needs no extra op.
          Value cond = s.getCondition();
          if (auto c = cond.getDefiningOp<arith::CmpFOp>();
              c && isWhereCondition(c))
            cond = c.getLhs();
          def(s, "where " + ref(cond) +
                     refs({s.getTrueValue(), s.getFalseValue()}));
          return success();
        })
        .Case([&](r::ClampOp) { return unary("clamp"); })
        .Case([&](r::BroadcastOp) { return unary("broadcast"); })
        .Case([&](r::LastOp) { return unary("last"); })
        .Case([&](r::NextOp n) {
          return unary(n.getMask() ? "next_masked" : "next");
        })
        .Case([&](r::DiscountedCumsumOp) { return unary("rcumsum"); })
        .Case([&](r::MaskOfOp) { return unary("mask_of"); })
        .Case([&](r::ModelOutputOp m) {
          def(m, r::stringifyModelOutput(m.getOutput()).str() +
                     ref(m.getTokens()).insert(0, " "));
          return success();
        })
        .Case([&](r::ReduceOp rd) {
          std::string s = (r::stringifyReduceOver(rd.getOver()) + "_" +
                           r::stringifyReduceStat(rd.getStat()))
                              .str() +
                          " " + ref(rd.getInput());
          if (rd.getMask())
            s += " " + ref(rd.getMask());
          if (rd.getOver() == r::ReduceOver::group)
            s += " " + std::to_string(rd.getGroupAttr().getInt());
          if (rd.getStat() == r::ReduceStat::var ||
              rd.getStat() == r::ReduceStat::std)
            s += " " + std::to_string(rd.getCorrectionAttr().getInt());
          def(rd, s);
          return success();
        })
        .Default([&](Operation *o) {
          return o->emitOpError("cannot be lowered to the runtime's fn code");
        });
  }

  std::string text;
  DenseMap<Value, int> ids;
  int next = 0;
};

} // namespace

/// The names of a record's fields: a host function's outputs, or a train
/// step's loss then its metrics.
static SmallVector<StringRef> fieldNames(Type record) {
  SmallVector<StringRef> names;
  for (StringAttr n : cast<r::RecordType>(record).getNames())
    names.push_back(n.getValue());
  return names;
}

/// Where the call is, for the runtime's errors; a line break in a file name
/// would end the line.
static std::string callSiteOf(Operation *op, bool withCallSite) {
  std::string at = withCallSite ? rlhfc::positionOf(op->getLoc()) : "";
  return StringRef(at).contains('\n') ? "" : at;
}

FailureOr<std::string> rlhfc::encodeFnCode(r::ComputeOp op, bool withCallSite) {
  return Encoder().run(op.getFnAttr().getValue(), false, op.getBody(),
                       fieldNames(op.getResult().getType()),
                       callSiteOf(op, withCallSite));
}

FailureOr<std::string> rlhfc::encodeFnCode(r::TrainStepOp op,
                                           bool withCallSite) {
  return Encoder().run(op.getFnAttr().getValue(), true, op.getBody(),
                       fieldNames(op.getStats().getType()),
                       callSiteOf(op, withCallSite));
}

LogicalResult rlhfc::printFnCode(ModuleOp module, llvm::raw_ostream &os) {
  bool first = true;
  WalkResult res = module.walk([&](Operation *op) {
    FailureOr<std::string> code = failure();
    if (auto c = dyn_cast<r::ComputeOp>(op); c && c.getFnAttr())
      code = encodeFnCode(c, /*withCallSite=*/false);
    else if (auto t = dyn_cast<r::TrainStepOp>(op); t && t.getFnAttr())
      code = encodeFnCode(t, /*withCallSite=*/false);
    else
      return WalkResult::advance();
    if (failed(code))
      return WalkResult::interrupt();
    os << (first ? "" : "\n") << *code << "\n";
    first = false;
    return WalkResult::advance();
  });
  return failure(res.wasInterrupted());
}
