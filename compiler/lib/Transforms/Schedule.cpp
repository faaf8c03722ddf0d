//===- Schedule.cpp - rlhf-schedule ---------------------------------------===//

#include "PassUtils.h"
#include "rlhfc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace rlhfc {
#define GEN_PASS_DEF_RLHFSCHEDULE
#include "rlhfc/Transforms/Passes.h.inc"
} // namespace rlhfc

using namespace mlir;
using namespace rlhfc;
namespace r = mlir::rlhf;

namespace {

struct Schedule : rlhfc::impl::RLHFScheduleBase<Schedule> {
  using RLHFScheduleBase::RLHFScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto cal = loadCalibrationFor(module, calibration);
    if (failed(cal))
      return signalPassFailure();
    Builder b(&getContext());
    for (auto alg : module.getOps<r::AlgorithmOp>()) {
      auto sim = simulatePlaced(alg, *cal, true);
      if (failed(sim))
        return signalPassFailure();
      const plan::Problem &p = sim->first;
      for (const plan::Event &e : sim->second.events) {
        if (e.kind != plan::Event::Call || e.iteration != 0)
          continue;
        Operation *op = p.calls[e.call].op;
        op->setAttr("start", b.getF64FloatAttr(e.start));
        op->setAttr("end", b.getF64FloatAttr(e.end));
      }
      alg->setAttr("iteration_time", b.getF64FloatAttr(sim->second.iterationTime));
    }
  }
};

} // namespace
