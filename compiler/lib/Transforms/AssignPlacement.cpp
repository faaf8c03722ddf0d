//===- AssignPlacement.cpp - rlhf-assign-placement ------------------------===//

#include "PassUtils.h"
#include "rlhfc/Transforms/Passes.h"
#include "rlhfc/Transforms/Pipeline.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

namespace rlhfc {
#define GEN_PASS_DEF_RLHFASSIGNPLACEMENT
#include "rlhfc/Transforms/Passes.h.inc"
} // namespace rlhfc

using namespace mlir;
using namespace rlhfc;

namespace {

struct AssignPlacement : rlhfc::impl::RLHFAssignPlacementBase<AssignPlacement> {
  using RLHFAssignPlacementBase::RLHFAssignPlacementBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    PlanningOptions asked;
    asked.planner = planner;
    asked.budget = budget;
    if (llvm::Error e = checkPlanningOptions(asked)) {
      module.emitError() << llvm::toString(std::move(e));
      return signalPassFailure();
    }
    std::optional<plan::Method> method = plan::parseMethod(planner);
    auto cal = loadCalibrationFor(module, calibration);
    if (failed(cal))
      return signalPassFailure();
    for (auto alg : module.getOps<mlir::rlhf::AlgorithmOp>()) {
      if (*method == plan::Method::Manual) {
        bool ok = true;
        for (Operation &op : alg.getBodyBlock())
          if (mlir::rlhf::isModelCall(&op) && !isPlaced(&op)) {
            plan::emitCallError(&op)
                << ("planner=manual needs a placement on every model call; "
                    "add '@place(mesh = ..., dp = ..., tp = ..., pp = ...)'");
            ok = false;
          }
        if (!ok)
          return signalPassFailure();
        continue;
      }
      plan::SearchOptions opts;
      opts.budget = budget;
      // One knob for the whole search; 10x keeps the default's 2M nodes.
      opts.polishNodes = budget > INT64_MAX / 10 ? INT64_MAX : 10 * budget;
      opts.seed = seed;
      if (progress)
        opts.progress = [name = alg.getSymName().str()](
                            llvm::StringRef stage, double done, double best) {
          llvm::errs() << llvm::formatv("rlhfc: planning '{0}': {1}", name,
                                        stage);
          if (stage.ends_with("annealing"))
            llvm::errs() << llvm::formatv(" {0:f0}%", 100 * done);
          if (std::isfinite(best))
            llvm::errs() << llvm::formatv(", best {0:f3} s", best);
          llvm::errs() << "\n";
        };
      auto planned = plan::planAlgorithm(alg, *cal, *method, opts);
      if (failed(planned))
        return signalPassFailure();
      const plan::Problem *p = &planned->problem;
      std::optional<plan::Assignment> &a = planned->assignment;
      if (!a) {
        if (*method == plan::Method::Separated &&
            int64_t(p->models.size()) > p->gpus) {
          alg.emitError() << "the separated planner gives each of the "
                          << p->models.size()
                          << " models its own GPUs, so it needs at least "
                          << p->models.size() << ", but the cluster has "
                          << p->gpus << "; use more GPUs, or another planner";
          return signalPassFailure();
        }
        if (*method != plan::Method::Search) {
          alg.emitError()
              << "the " << planner
              << " planner found no placement that fits in memory on "
              << p->gpus << (p->gpus == 1 ? " GPU" : " GPUs")
              << "; use more GPUs, more micro-batches "
              << "or minibatches, or try planner=search";
          return signalPassFailure();
        }
        // Nothing fits (usually because of @place pins): place every free
        // call at its smallest footprint and let rlhf-check-memory say which
        // GPU overflows, with which models, at the call's source location.
        a = plan::Assignment(p->calls.size(), -1);
        for (size_t c = 0; c < p->calls.size(); ++c) {
          if (p->calls[c].host)
            continue;
          int best = 0;
          for (int k = 0; k < int(p->cands[c].size()); ++k)
            if (p->cands[c][k].mem.total() < p->cands[c][best].mem.total())
              best = k;
          (*a)[c] = best;
        }
      }
      plan::apply(*p, *a);
    }
  }
};

} // namespace
