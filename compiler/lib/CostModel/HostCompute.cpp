//===- HostCompute.cpp - the cost of host functions -----------------------===//
//
// A host function streams its batch tensors through ATen ops on the
// controller: each op costs a dispatch plus the bytes it reads and writes
// at the controller's rate (CostModel.h). A scan over the sequence
// (discounted_cumsum) dispatches a few ops per position.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/CostModel/FromIR.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <algorithm>
#include <cmath>

using namespace rlhfc::cost;
using namespace mlir;
namespace r = mlir::rlhf;

namespace {

/// The assumed latency of one script_reward request: a worker decoding a
/// JSON line, checking an answer and replying. Real checkers range from
/// 0.1 ms (a regex) to seconds (running unit tests); this is an order of
/// magnitude for a math-answer checker, not a measurement.
constexpr double kScriptRequestSeconds = 1e-3;

/// Elements of a body value for a batch of `n` rows of `s` positions.
double elements(Type t, double n, double s) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt)
    return 1;
  return rt.getRank() == 1 ? n : n * s;
}

} // namespace

/// One run of the host function.
static HostEstimate estimateOnce(r::ComputeOp op) {
  double n = 1, s = 1;
  for (Value v : op.getInputs()) {
    auto t = cast<RankedTensorType>(v.getType());
    if (r::getTensorKind(t) == r::TensorKind::answer)
      continue;
    n = std::max(n, double(t.getDimSize(0)));
    if (t.getRank() == 2)
      s = std::max(s, double(t.getDimSize(1)));
  }
  HostEstimate e;
  if (op.getKind() != r::ComputeKind::fn) {
    // exact_match and script_reward decode and compare text: about two
    // passes over the tokens; script_reward's requests are below.
    constexpr double ops = 2;
    double bytes = 4.0 * n * s;
    e.time = ops * (kHostOpSeconds + 3 * bytes / kHostBytesPerSecond);
    e.bytes = ops * bytes;
    if (op.getKind() == r::ComputeKind::script_reward) {
      // One request per sample, `workers` in flight: N / workers rounds of
      // an assumed per-request latency (a Python checker's parse and reply).
      double workers = 4;
      if (auto w = op.getSettings().getAs<FloatAttr>("workers"))
        workers = std::max(1.0, w.getValueAsDouble());
      e.time += std::ceil(n / workers) * kScriptRequestSeconds;
    }
    return e;
  }
  op.getBody().walk([&](Operation *inner) {
    if (inner->getNumResults() != 1 || isa<r::SplatOp>(inner) ||
        isa<arith::ConstantOp>(inner))
      return; // free: folded into their users by the runtime
    double out = 4.0 * elements(inner->getResult(0).getType(), n, s);
    double in = 0;
    for (Value v : inner->getOperands())
      in += 4.0 * elements(v.getType(), n, s);
    e.time += kHostOpSeconds + (in + out) / kHostBytesPerSecond;
    if (isa<r::DiscountedCumsumOp>(inner))
      e.time += 4 * s * kHostOpSeconds;
    e.bytes += out; // every value stays alive to the end: an upper bound
  });
  return e;
}

HostEstimate rlhfc::cost::estimateHost(r::ComputeOp op) {
  HostEstimate e = estimateOnce(op);
  // Dynamic sampling repeats it: its time, not its memory.
  e.time *= r::expectedRounds(op);
  return e;
}
