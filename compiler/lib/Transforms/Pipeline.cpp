//===- Pipeline.cpp - the planning pipeline of rlhfc ----------------------===//

#include "rlhfc/Transforms/Pipeline.h"
#include "rlhfc/Transforms/Passes.h"

#include "llvm/Support/Process.h"

using namespace mlir;
using namespace rlhfc;
namespace cl = llvm::cl;

PlanningCLOptions::PlanningCLOptions(cl::OptionCategory &category,
                                     bool offerProgress)
    : offerProgress(offerProgress),
      planner("planner",
              cl::desc("How to place calls: search (default), heuristic "
                       "(ReaLHF-style symmetric), colocated (verl-like), "
                       "separated (OpenRLHF-like) or manual (only @place "
                       "pins)"),
              cl::init("search"), cl::cat(category)),
      budget("search-budget",
             cl::desc("Assignments the search may simulate (default 200000)"),
             cl::init(200000), cl::cat(category)),
      seed("seed", cl::desc("Search seed (default 1)"), cl::init(1),
           cl::cat(category)),
      calibration("calibration",
                  cl::desc("JSON file of measured efficiency factors per "
                           "hardware preset (see docs/cost-model.md)"),
                  cl::value_desc("file"), cl::init(""), cl::cat(category)),
      progress("progress",
               cl::desc("Report the search's stage and best plan so far on "
                        "stderr (default: when stderr is a terminal)"),
               cl::cat(category)) {
  if (!offerProgress)
    progress.removeArgument();
}

llvm::Error rlhfc::checkPlanningOptions(const PlanningOptions &o) {
  if (!plan::parseMethod(o.planner))
    return llvm::createStringError(
        "unknown planner '" + o.planner +
        "'; use search, heuristic, colocated, separated or manual");
  if (o.budget < 1)
    return llvm::createStringError(
        "the search budget must be at least 1, got " +
        std::to_string(o.budget) +
        "; pass --search-budget=N with N >= 1 (default 200000)");
  return llvm::Error::success();
}

PlanningOptions PlanningCLOptions::get() const {
  PlanningOptions o;
  o.planner = planner;
  o.budget = budget;
  o.seed = seed;
  o.calibration = calibration;
  if (offerProgress)
    o.progress = progress == cl::BOU_UNSET
                     ? llvm::sys::Process::StandardErrIsDisplayed()
                     : progress == cl::BOU_TRUE;
  return o;
}

void rlhfc::buildPlanningPipeline(OpPassManager &pm,
                                  const PlanningOptions &opts) {
  pm.addPass(createRLHFSimplifyFns());
  pm.addPass(createRLHFInferShapes());
  RLHFAssignPlacementOptions place;
  place.planner = opts.planner;
  place.budget = opts.budget;
  place.seed = opts.seed;
  place.calibration = opts.calibration;
  place.progress = opts.progress;
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
