//===- RLHFFnOps.cpp - function bodies and their ops ----------------------===//
//
// Verifiers of the ops in RLHFFnOps.td and of the regions of `rlhf.compute`
// and `rlhf.train_step` that hold a function written in the language.
//
//===----------------------------------------------------------------------===//

#include "FnBody.h"
#include "rlhf/IR/RLHFOps.h"

using namespace mlir;
using namespace mlir::rlhf;

Type mlir::rlhf::fnValueType(MLIRContext *ctx, int64_t rank, bool tokens) {
  Builder b(ctx);
  if (tokens)
    return RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                 b.getI32Type());
  if (rank == 0)
    return b.getF64Type();
  SmallVector<int64_t, 2> shape(size_t(rank), ShapedType::kDynamic);
  return RankedTensorType::get(shape, b.getF32Type());
}

Type mlir::rlhf::fnValueType(RankedTensorType kinded) {
  return fnValueType(kinded.getContext(), kinded.getRank(),
                     getTensorKind(kinded) == TensorKind::tokens);
}

LogicalResult mlir::rlhf::verifyNoFnBody(Operation *op, StringAttr fn,
                                         Region &body) {
  if (fn || !body.empty())
    return op->emitOpError()
           << "has a function name or body, but its kind is not 'fn'";
  return success();
}

LogicalResult mlir::rlhf::verifyFnBody(Operation *op, StringAttr fn,
                                       ValueRange inputs, Region &body,
                                       bool loss,
                                       ArrayRef<RankedTensorType> results) {
  if (!fn)
    return op->emitOpError() << "of kind 'fn' needs the function's name";
  if (!body.hasOneBlock())
    return op->emitOpError()
           << "of function '" << fn.getValue() << "' needs a body of one block";
  Block &block = body.front();
  if (block.getNumArguments() != inputs.size())
    return op->emitOpError()
           << "passes " << inputs.size() << " inputs to a body of "
           << block.getNumArguments() << " arguments";
  for (auto [i, in, arg] : llvm::enumerate(inputs, block.getArguments())) {
    Type want = fnValueType(cast<RankedTensorType>(in.getType()));
    if (arg.getType() != want)
      return op->emitOpError()
             << "body argument #" << i << " must be " << want << " for input "
             << in.getType() << ", got " << arg.getType();
  }
  // The op's own verifier runs before MLIR checks its blocks' terminators.
  auto yield = block.empty() ? YieldOp() : dyn_cast<YieldOp>(&block.back());
  if (!yield)
    return op->emitOpError() << "body must end in rlhf.yield";
  if (loss) {
    // The loss, then one metric per further field of the stats record.
    if (yield.getValues().empty() ||
        yield.getValues().size() != std::max<size_t>(1, results.size()) ||
        llvm::any_of(yield.getValues().getTypes(),
                     [](Type t) { return !t.isF64(); }))
      return yield.emitOpError()
             << "of a loss yields f64 scalars: the loss, then one per "
                "metric of its stats record";
    bool lm = false, value = false, unverified = false;
    body.walk([&](ModelOutputOp m) {
      // Not verified yet: an op without its output fails on its own.
      if (!m.getOutputAttr()) {
        unverified = true;
        return;
      }
      bool isValue = m.getOutput() == ModelOutput::values ||
                     m.getOutput() == ModelOutput::score;
      (isValue ? value : lm) = true;
    });
    if (unverified)
      return success();
    if (!lm && !value)
      return op->emitOpError() << "loss '" << fn.getValue()
                               << "' reads no output of the trained model";
    if (lm && value)
      return op->emitOpError()
             << "loss '" << fn.getValue()
             << "' reads outputs of an lm head and of a value head";
    return success();
  }
  if (yield.getValues().size() != results.size())
    return yield.emitOpError()
           << "yields " << yield.getValues().size() << " values for "
           << results.size() << " result fields";
  for (auto [i, v, field] : llvm::enumerate(yield.getValues(), results)) {
    if (getTensorKind(field) == TensorKind::tokens)
      return op->emitOpError() << "result field #" << i
                               << " holds token ids, which a function cannot "
                                  "compute";
    Type want = fnValueType(field);
    if (v.getType() != want)
      return yield.emitOpError()
             << "value #" << i << " must be " << want << " for result field "
             << field << ", got " << v.getType();
  }
  return success();
}

LogicalResult SplatOp::verify() {
  if (!isa<RankedTensorType>(getLike().getType()))
    return emitOpError() << "splats a scalar like a tensor, not like "
                         << getLike().getType();
  return success();
}

static int64_t rankOf(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt ? rt.getRank() : 0;
}

LogicalResult ReduceOp::verify() {
  int64_t in = rankOf(getInput().getType()), out = rankOf(getType());
  bool masked = bool(getMask());
  auto expect = [&](int64_t wantIn, bool wantMask, int64_t wantOut,
                    StringRef what) -> LogicalResult {
    if (in != wantIn || masked != wantMask || out != wantOut)
      return emitOpError() << "over " << stringifyReduceOver(getOver())
                           << " takes " << what;
    return success();
  };
  LogicalResult shape = failure();
  switch (getOver()) {
  case ReduceOver::seq:
    shape = expect(2, true, 1,
                   "a per-token value and a mask to a "
                   "per-sequence value");
    break;
  case ReduceOver::group:
    shape = expect(1, false, 1,
                   "a per-sequence value, unmasked, to a "
                   "per-sequence value");
    if (succeeded(shape) && getGroupAttr().getInt() < 1)
      return emitOpError() << "over groups needs a group size of at least 1";
    break;
  case ReduceOver::batch:
    shape = expect(1, false, 0, "a per-sequence value, unmasked, to a scalar");
    break;
  case ReduceOver::token:
    shape = expect(2, true, 0, "a per-token value and a mask to a scalar");
    break;
  }
  if (failed(shape))
    return failure();
  if (getOver() != ReduceOver::group && getGroupAttr().getInt() != 0)
    return emitOpError() << "has a group size but does not reduce over groups";
  if (getCorrectionAttr().getInt() < 0)
    return emitOpError() << "correction must not be negative";
  // Sums and means over a loss's micro-batches add up to the batch's (the
  // runtime divides by the whole batch's counts); extremes do not.
  const bool extreme =
      getStat() == ReduceStat::max || getStat() == ReduceStat::min;
  if (extreme &&
      (getOver() == ReduceOver::batch || getOver() == ReduceOver::token) &&
      (*this)->getParentOfType<TrainStepOp>())
    return emitOpError() << "takes the " << stringifyReduceStat(getStat())
                         << (getOver() == ReduceOver::token
                                 ? " over the batch's tokens"
                                 : " over the batch")
                         << ", which a loss, run once per micro-batch, does "
                            "not see whole; compute it in a host function";
  return success();
}

/// Where an adaptive coefficient may stand: in a call's body whose results
/// (a train step's metrics, after its loss) include `metric`, which it
/// follows, and as the only one of its kind there.
template <typename OpTy>
static LogicalResult verifyAdaptive(OpTy op, StringRef metric, StringRef what) {
  Operation *call = op->getParentOp();
  Type record = isa_and_nonnull<ComputeOp>(call)
                    ? cast<ComputeOp>(call).getResult().getType()
                : isa_and_nonnull<TrainStepOp>(call)
                    ? cast<TrainStepOp>(call).getStats().getType()
                    : Type();
  if (!record)
    return op.emitOpError() << "belongs in the body of an rlhf.compute or "
                               "rlhf.train_step";
  // A train step's first field is its loss; the metrics follow.
  auto names = cast<RecordType>(record).getNames();
  bool measured = false;
  for (size_t i = isa<TrainStepOp>(call) ? 1 : 0; i < names.size(); ++i)
    measured = measured || names[i].getValue() == metric;
  if (!measured)
    return op.emitOpError() << "adapts to the " << what
                            << " its call measures, but the call has no "
                               "number result '"
                            << metric << "'";
  for (Operation &other : op->getBlock()->getOperations()) {
    if (&other == op.getOperation())
      break;
    if (isa<OpTy>(other))
      return op.emitOpError() << "is the second in this body; a call adapts "
                                 "one "
                              << what << " coefficient";
  }
  return success();
}

LogicalResult AdaptiveKlOp::verify() {
  const double init = getInit().convertToDouble(),
               target = getTarget().convertToDouble(),
               horizon = getHorizon().convertToDouble();
  if (!(init > 0) || !(target > 0) || !(horizon >= 1))
    return emitOpError() << "needs init and target above 0 and a horizon of "
                            "at least 1";
  return verifyAdaptive(*this, "kl", "KL");
}

LogicalResult AdaptiveEntropyOp::verify() {
  const double init = getInit().convertToDouble(),
               target = getTarget().convertToDouble(),
               delta = getDelta().convertToDouble(),
               max = getMax().convertToDouble(),
               min = getMin().convertToDouble();
  if (!(target > 0) || !(delta > 0) || !(min >= 0) || !(init >= min) ||
      !(max >= init))
    return emitOpError() << "needs a target and a delta above 0 and "
                            "0 <= min <= init <= max";
  return verifyAdaptive(*this, "entropy", "entropy");
}

LogicalResult RunningMomentOp::verify() {
  if (getStat() != ReduceStat::mean && getStat() != ReduceStat::std)
    return emitOpError() << "keeps a mean or a standard deviation, not a "
                         << stringifyReduceStat(getStat());
  if (!isa_and_nonnull<ComputeOp>((*this)->getParentOp()))
    return emitOpError() << "keeps statistics across calls, so it belongs "
                            "in the body of an rlhf.compute (a host "
                            "function), not a loss";
  return success();
}

LogicalResult MaskOfOp::verify() {
  if (!isa<BlockArgument>(getInput()))
    return emitOpError() << "reads the mask of a call's input, so its operand "
                            "is an argument of the body";
  return success();
}

LogicalResult ModelOutputOp::verify() {
  if (!(*this)->getParentOfType<TrainStepOp>())
    return emitOpError() << "reads the trained model, so it belongs in the "
                            "body of an rlhf.train_step";
  int64_t want = getOutput() == ModelOutput::score ? 1 : 2;
  if (rankOf(getType()) != want)
    return emitOpError() << stringifyModelOutput(getOutput()) << " is "
                         << (want == 1 ? "per sequence" : "per token");
  return success();
}
