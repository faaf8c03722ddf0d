//===- PassUtils.cpp - shared by the planning passes ----------------------===//

#include "PassUtils.h"

#include <cmath>

using namespace mlir;
using namespace rlhfc;

FailureOr<cost::Calibration> rlhfc::loadCalibrationFor(ModuleOp module,
                                                       llvm::StringRef path) {
  if (path.empty())
    return cost::Calibration{};
  auto cal = cost::loadCalibration(path);
  if (!cal) {
    module.emitError() << llvm::toString(cal.takeError());
    return failure();
  }
  return std::move(*cal);
}

mlir::rlhf::CostAttr rlhfc::costAttr(MLIRContext *ctx, double seconds,
                                     double bytes) {
  double shown = bytes;
  if (std::isfinite(bytes) && bytes != 0) {
    const double scale =
        std::pow(10.0, std::floor(std::log10(std::fabs(bytes))) - 5);
    shown = std::round(bytes / scale) * scale;
  }
  return mlir::rlhf::CostAttr::get(ctx, llvm::APFloat(seconds),
                                   llvm::APFloat(shown));
}

bool rlhfc::isPlaced(Operation *op) {
  return op->getAttr("mesh") && op->getAttr("strategy");
}

FailureOr<std::pair<plan::Problem, plan::SimResult>>
rlhfc::simulatePlaced(mlir::rlhf::AlgorithmOp alg, const cost::Calibration &cal,
                      bool record) {
  for (Operation &op : alg.getBodyBlock())
    if (mlir::rlhf::isModelCall(&op) && !isPlaced(&op))
      return op.emitError("call has no placement; run rlhf-assign-placement first");
  auto p = plan::buildProblem(alg, cal);
  if (failed(p))
    return failure();
  // Every call is pinned to its placement: its only candidate.
  plan::Assignment a(p->calls.size(), -1);
  for (size_t c = 0; c < p->calls.size(); ++c)
    if (!p->calls[c].host)
      a[c] = 0;
  plan::SimResult r = plan::simulate(*p, a, 3, record);
  return std::make_pair(std::move(*p), std::move(r));
}
