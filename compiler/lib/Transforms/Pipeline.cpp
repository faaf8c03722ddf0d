//===- Pipeline.cpp - the planning pipeline of rlhfc ----------------------===//

#include "rlhfc/Transforms/Pipeline.h"
#include "rlhfc/Transforms/Passes.h"

using namespace mlir;
using namespace rlhfc;

void rlhfc::buildPlanningPipeline(OpPassManager &pm,
                                  const PlanningOptions &opts) {
  pm.addPass(createRLHFInferShapes());
  RLHFAssignPlacementOptions place;
  place.planner = opts.planner;
  place.budget = opts.budget;
  place.seed = opts.seed;
  place.calibration = opts.calibration;
  pm.addPass(createRLHFAssignPlacement(place));
  pm.addPass(createRLHFInsertRealloc());
  pm.addPass(createRLHFInsertTransfer());
  RLHFCheckMemoryOptions mem;
  mem.calibration = opts.calibration;
  pm.addPass(createRLHFCheckMemory(mem));
  RLHFEstimateCostOptions est;
  est.calibration = opts.calibration;
  pm.addPass(createRLHFEstimateCost(est));
  RLHFScheduleOptions sched;
  sched.calibration = opts.calibration;
  pm.addPass(createRLHFSchedule(sched));
}

LogicalResult rlhfc::runPlanningPipeline(ModuleOp module,
                                         const PlanningOptions &opts) {
  PassManager pm(module->getContext());
  buildPlanningPipeline(pm, opts);
  return pm.run(module);
}
