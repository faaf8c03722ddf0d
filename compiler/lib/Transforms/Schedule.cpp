//===- Schedule.cpp - rlhf-schedule ---------------------------------------===//

#include "EvalSlice.h"
#include "PassUtils.h"
#include "rlhfc/Planner/Timeline.h"
#include "rlhfc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

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
        if ((e.kind != plan::Event::Call && e.kind != plan::Event::Average) ||
            e.iteration != 0)
          continue;
        Operation *op = e.kind == plan::Event::Call ? p.calls[e.call].op
                                                    : p.averages[e.call].op;
        op->setAttr("start", b.getF64FloatAttr(e.start));
        op->setAttr("end", b.getF64FloatAttr(e.end));
      }
      alg->setAttr("iteration_time",
                   b.getF64FloatAttr(sim->second.iterationTime));
      // Asynchronous plans: what a generator that runs ahead keeps on each of
      // its GPUs beside its model's trainer weights (SimulateAsync.cpp).
      plan::Assignment a(p.calls.size(), -1);
      for (size_t c = 0; c < p.calls.size(); ++c)
        if (!p.calls[c].host)
          a[c] = 0;
      double peak = 0;
      for (double m : sim->second.peakMemory)
        peak = std::max(peak, m);
      for (size_t c = 0; c < p.calls.size(); ++c) {
        if (!plan::ownsWeightCopy(p, a, c))
          continue;
        const plan::Candidate &k = p.cands[c][0];
        Operation *op = p.calls[c].op;
        op->setAttr("weight_copy", b.getF64FloatAttr(k.mem.weights));
        op->setAttr("in_flight",
                    b.getF64FloatAttr(double(p.staleness) *
                                      p.calls[c].outBytes / double(k.s.dp)));
      }
      if (p.staleness > 0)
        alg->setAttr("peak_memory", b.getF64FloatAttr(peak));
      // Held-out evaluation: the price of one batch, printed beside the
      // runtime's measured time.
      if (alg.getEval()) {
        FailureOr<lowering::EvalSlice> es = lowering::evalSlice(alg);
        if (failed(es))
          return signalPassFailure();
        FailureOr<double> t = lowering::evalBatchTime(alg, *es, *cal);
        if (failed(t))
          return signalPassFailure();
        alg->setAttr("eval_batch_time", b.getF64FloatAttr(*t));
      }
      if (!trace.empty()) {
        std::error_code ec;
        llvm::raw_fd_ostream os(trace, ec);
        if (ec) {
          alg.emitError() << "cannot write the trace to '" << trace
                          << "': " << ec.message();
          return signalPassFailure();
        }
        plan::writeChromeTrace(p, sim->second, alg.getSymName(), os);
      }
    }
  }
};

} // namespace
