//===- Plan.cpp - the plan of an open document ----------------------------===//
//
// Lowers the checked program and runs the same planning pipeline as
// `rlhfc --emit=plan`, keeping the report of every run and, per call, the
// source location it came from, so a hover on the call finds its entry.
// Planning can take seconds, so it runs on demand and once per version.
//
//===----------------------------------------------------------------------===//

#include "Document.h"

#include "rlhfc/Frontend/MLIRGen.h"
#include "rlhfc/Planner/Report.h"

#include "mlir/Tools/lsp-server-support/Logging.h"

using namespace rlhfc;
using namespace rlhfc::lsp;
namespace mlsp = mlir::lsp;

void Document::plan() {
  if (planned)
    return;
  planned = true;
  if (!checked || program.instances.empty())
    return;
  mlsp::Logger::info("planning {0}", uri.file());
  DiagnosticRecorder recorder(ctx, planDiags);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlirGen(program, ctx);
  if (!module || mlir::failed(runPlanningPipeline(*module, options.planning)))
    return;
  cost::Calibration calibration;
  if (!options.planning.calibration.empty()) {
    // The passes read the same file and reported a bad one already.
    auto loaded = cost::loadCalibration(options.planning.calibration);
    if (!loaded) {
      llvm::consumeError(loaded.takeError());
      return;
    }
    calibration = std::move(*loaded);
  }
  for (auto alg : module->getOps<mlir::rlhf::AlgorithmOp>()) {
    auto placed = simulatePlaced(alg, calibration, /*record=*/true);
    if (mlir::failed(placed))
      continue;
    RunPlan rp;
    // MLIRGen gives each run's algorithm op the location of its run.
    for (const sema::Instance &in : program.instances)
      if (mlir::Location(in.loc) == alg.getLoc())
        rp.instance = &in;
    llvm::json::Value report =
        plan::planToJson(alg, placed->first, placed->second);
    rp.report = std::move(*report.getAsObject());
    for (const plan::Call &call : placed->first.calls)
      rp.callLocs.push_back(call.op->getLoc());
    for (const plan::Average &e : placed->first.averages)
      rp.emaLocs.push_back(e.op->getLoc());
    if (rp.instance)
      plans.push_back(std::move(rp));
  }
}

bool Document::takeNewPlanDiagnostics() {
  if (planDiags.empty() || planDiagsTaken)
    return false;
  planDiagsTaken = true;
  return true;
}

const RunPlan *Document::getPlan(const sema::Instance &instance) {
  plan();
  for (const RunPlan &rp : plans)
    if (rp.instance == &instance)
      return &rp;
  return nullptr;
}

std::string Document::getPlanError() const {
  for (const RecordedDiagnostic &d : planDiags)
    if (d.severity == mlir::DiagnosticSeverity::Error)
      return d.message;
  return "";
}
