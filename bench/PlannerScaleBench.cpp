//===- PlannerScaleBench.cpp - the planner's search time at scale ---------===//
//
// rlhf-bench-planner --scale: 4 x 70B PPO on 8 to 512 nodes, the search's
// wall time by stage and its plan against the heuristic's; with --async,
// the same programs under staleness 1 beside the synchronous search.
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"
#include "PlannerBench.h"

#include "rlhfc/Planner/Planner.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <optional>
#include <utility>

using namespace rlhfc;
using namespace rlhfc::bench;
using llvm::formatv;

namespace {

/// The scale programs, lowered, one per node count of `nodes` (8 to 512 when
/// empty): PPO with four LLaMA-2 70B models, generation 128 tokens, 4
/// prompts per GPU. `f(nodes, gpus, batch, alg)` reports a row and returns
/// the seconds the headline reports (nullopt: a failure, which stops the
/// run, as a failed lowering does). Returns the largest cluster's GPUs and
/// seconds.
std::optional<std::pair<int, double>>
forEachScale(llvm::ArrayRef<int> counts,
             llvm::function_ref<std::optional<double>(int, int, int,
                                                      mlir::rlhf::AlgorithmOp)>
                 f) {
  static const int kDefault[] = {8, 16, 32, 64, 128, 256, 512};
  std::pair<int, double> largest{0, 0.0};
  for (int n : counts.empty() ? llvm::ArrayRef<int>(kDefault) : counts) {
    mlir::MLIRContext ctx;
    mlir::ScopedDiagnosticHandler report(&ctx, [](mlir::Diagnostic &d) {
      llvm::errs() << d << "\n";
      return mlir::success();
    });
    const int gpus = 8 * n, batch = 4 * gpus;
    auto module = lower(ctx, program(70, 70, gpus, 128, batch));
    if (!module)
      return std::nullopt;
    std::optional<double> seconds =
        f(n, gpus, batch, *module->getOps<mlir::rlhf::AlgorithmOp>().begin());
    if (!seconds)
      return std::nullopt;
    llvm::outs().flush();
    if (gpus >= largest.first)
      largest = {gpus, *seconds};
  }
  return largest;
}

} // namespace

/// The batch is weak-scaled with the cluster (512 prompts at 16 nodes: the
/// 70B+70B setting of the settings table). Per node count: the problem's
/// size, the time to build it (candidates) and to search it, as rlhfc pays
/// them, and the searched plan against the heuristic's.
int bench::scaleBench(const cost::Calibration &cal, llvm::ArrayRef<int> nodes,
                      int64_t budget) {
  llvm::outs() << formatv("{0,5} {1,5} {2,6} {3,7} | {4,6} {5,6} {6,6} "
                          "{7,6} {8,6} {9,6} {10,7} | {11,9} {12,9} {13,8}\n",
                          "nodes", "GPUs", "batch", "cands", "build", "starts",
                          "anneal", "descnt", "polish", "refine", "total s",
                          "heuristic", "search", "vs heur");
  auto largest = forEachScale(
      nodes,
      [&](int n, int gpus, int batch,
          mlir::rlhf::AlgorithmOp alg) -> std::optional<double> {
        std::chrono::steady_clock::time_point t1;
        plan::SearchOptions so;
        so.budget = budget;
        // Seconds spent before each stage the search reports begins: the
        // starts (baselines, partitions) end at annealing's first report.
        llvm::StringMap<double> stageStart;
        so.progress = [&](llvm::StringRef stage, double, double) {
          stageStart.try_emplace(stage, secondsSince(t1));
        };
        auto t0 = std::chrono::steady_clock::now();
        auto p = plan::buildProblem(alg, cal);
        if (mlir::failed(p))
          return std::nullopt;
        double build = secondsSince(t0);
        t1 = std::chrono::steady_clock::now();
        auto searched = plan::solve(*p, plan::Method::Search, so);
        double search = secondsSince(t1), total = secondsSince(t0);
        auto heur = plan::solve(*p, plan::Method::Heuristic);
        auto timeOf = [&](const std::optional<plan::Assignment> &a) {
          return a ? plan::simulate(*p, *a).iterationTime : INFINITY;
        };
        size_t cands = 0;
        for (const auto &cs : p->cands)
          cands += cs.size();
        // Each stage's seconds, from its start to the next reported stage's
        // (the starts: the baselines and partitions before annealing); "-"
        // where the search had no such stage.
        std::vector<std::pair<const char *, double>> at = {{"", 0.0}};
        for (const char *stage :
             {"annealing", "descent", "polishing", "refining"})
          if (auto it = stageStart.find(stage); it != stageStart.end())
            at.push_back({stage, it->second});
        std::string spans;
        for (const char *stage :
             {"", "annealing", "descent", "polishing", "refining"}) {
          auto it = llvm::find_if(
              at, [&](auto &x) { return llvm::StringRef(x.first) == stage; });
          if (it == at.end()) {
            spans += formatv("{0,6} ", "-").str();
            continue;
          }
          double until = it + 1 == at.end() ? search : (it + 1)->second;
          spans += formatv("{0,6:f2} ", until - it->second).str();
        }
        llvm::outs() << formatv(
            "{0,5} {1,5} {2,6} {3,7} | {4,6:f2} {5}{6,7:f2} "
            "| {7,8:f2}s {8,8:f2}s {9,7:f2}x\n",
            n, gpus, batch, cands, build, spans, total, timeOf(heur),
            timeOf(searched), timeOf(heur) / timeOf(searched));
        return total;
      });
  if (!largest)
    return 1;
  llvm::outs() << formatv("search time at {0} GPUs (4 x 70B PPO): {1:f1} s\n",
                          largest->first, largest->second);
  return 0;
}

/// --scale --async: the same programs with staleness 1, planned as rlhfc
/// plans them (planAlgorithm: half-node meshes and offloaded models, and
/// above 16 nodes the scaled-down copy searched asynchronously too), beside
/// the synchronous search's plan. Per node count: the async search's wall
/// time (building included) and its plan against the synchronous one.
int bench::scaleAsyncBench(const cost::Calibration &cal,
                           llvm::ArrayRef<int> nodes, int64_t budget) {
  llvm::outs() << formatv("{0,5} {1,5} {2,6} | {3,7} {4,7} | {5,9} {6,9} "
                          "{7,8}\n",
                          "nodes", "GPUs", "batch", "sync s", "async s", "sync",
                          "async k1", "vs sync");
  auto largest = forEachScale(
      nodes,
      [&](int n, int gpus, int batch,
          mlir::rlhf::AlgorithmOp alg) -> std::optional<double> {
        plan::SearchOptions so;
        so.budget = budget;
        auto timed = [&](double &wall) {
          auto t0 = std::chrono::steady_clock::now();
          auto planned =
              plan::planAlgorithm(alg, cal, plan::Method::Search, so);
          wall = secondsSince(t0);
          if (mlir::failed(planned) || !planned->assignment)
            return double(INFINITY);
          return plan::simulate(planned->problem, *planned->assignment)
              .iterationTime;
        };
        double syncWall = 0, asyncWall = 0;
        double sync = timed(syncWall);
        makeAsync(alg, 1);
        double asyncTime = timed(asyncWall);
        llvm::outs() << formatv("{0,5} {1,5} {2,6} | {3,7:f2} {4,7:f2} | "
                                "{5,8:f2}s {6,8:f2}s {7,7:f2}x\n",
                                n, gpus, batch, syncWall, asyncWall, sync,
                                asyncTime, sync / asyncTime);
        return asyncWall;
      });
  if (!largest)
    return 1;
  llvm::outs() << formatv(
      "async search time at {0} GPUs (4 x 70B PPO, staleness 1): {1:f1} s\n",
      largest->first, largest->second);
  return 0;
}
