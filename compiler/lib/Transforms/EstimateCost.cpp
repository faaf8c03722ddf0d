//===- EstimateCost.cpp - rlhf-estimate-cost ------------------------------===//

#include "PassUtils.h"
#include "rlhfc/Transforms/Passes.h"

namespace rlhfc {
#define GEN_PASS_DEF_RLHFESTIMATECOST
#include "rlhfc/Transforms/Passes.h.inc"
} // namespace rlhfc

using namespace mlir;
using namespace rlhfc;
namespace r = mlir::rlhf;

namespace {

struct EstimateCost : rlhfc::impl::RLHFEstimateCostBase<EstimateCost> {
  using RLHFEstimateCostBase::RLHFEstimateCostBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto cal = loadCalibrationFor(module, calibration);
    if (failed(cal))
      return signalPassFailure();
    SymbolTable symbols(module);
    for (auto alg : module.getOps<r::AlgorithmOp>()) {
      auto cluster = alg.getClusterOp();
      if (!cluster)
        continue;
      cost::Hardware hw = cost::hardwareOf(cluster, *cal);
      for (Operation &op : alg.getBodyBlock()) {
        if (!r::isModelCall(&op) || !isPlaced(&op))
          continue;
        auto model = symbols.lookup<r::ModelOp>(
            op.getAttrOfType<FlatSymbolRefAttr>("model").getValue());
        cost::Estimate e = cost::estimateCall(cost::archOf(model), hw,
                                              *cost::strategyOf(&op),
                                              cost::shapeOf(&op, model));
        op.setAttr("cost",
                   costAttr(&getContext(), e.time.total(), e.memory.total()));
      }
    }
  }
};

} // namespace
