//===- BenchSupport.cpp - setup shared by the planner benchmarks ----------===//

#include "BenchSupport.h"

#include "rlhfc/Frontend/Frontend.h"
#include "rlhfc/Frontend/MLIRGen.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace rlhfc;
using llvm::formatv;

bench::CommonOptions::CommonOptions(llvm::cl::OptionCategory &cat,
                                    const char *quickWhat,
                                    const char *ceilingWhat)
    : budget("budget",
             llvm::cl::desc("search budget in simulated assignments (rlhfc's "
                            "default, 200000)"),
             llvm::cl::init(200000), llvm::cl::cat(cat)),
      quick("quick", llvm::cl::desc(quickWhat), llvm::cl::cat(cat)),
      only("only", llvm::cl::desc("run only this setting (0-based)"),
           llvm::cl::init(-1), llvm::cl::cat(cat)),
      calibrationFile(
          "calibration",
          llvm::cl::desc("efficiency factors to price with instead of the "
                         "presets' (JSON, see docs/cost-model.md)"),
          llvm::cl::value_desc("file"), llvm::cl::cat(cat)),
      ceiling("ceiling", llvm::cl::desc(ceilingWhat), llvm::cl::cat(cat)),
      floorNodes("floor-nodes",
                 llvm::cl::desc("with --ceiling: branch-and-bound nodes of "
                                "the relaxed floor per setting"),
                 llvm::cl::init(100'000'000), llvm::cl::cat(cat)),
      cat(cat) {}

bool bench::CommonOptions::parse(int argc, char **argv, const char *overview,
                                 llvm::StringRef tool, cost::Calibration &cal) {
  llvm::cl::HideUnrelatedOptions(cat);
  llvm::cl::ParseCommandLineOptions(argc, argv, overview);
  return loadCalibrationFile(calibrationFile, tool, cal);
}

mlir::OwningOpRef<mlir::ModuleOp> bench::lower(mlir::MLIRContext &ctx,
                                               const std::string &text) {
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "bench.rlhf"), llvm::SMLoc());
  FrontendOptions opts;
  opts.stdlibDir = RLHF_STDLIB_DIR;
  auto prog = loadProgram(sm, ctx, opts);
  if (!prog)
    return nullptr;
  return mlirGen(*prog, ctx);
}

double bench::secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

bool bench::loadCalibrationFile(const std::string &path, llvm::StringRef tool,
                                cost::Calibration &out) {
  if (path.empty())
    return true;
  auto loaded = cost::loadCalibration(path);
  if (!loaded) {
    llvm::errs() << tool << ": error: " << llvm::toString(loaded.takeError())
                 << "\n";
    return false;
  }
  out = std::move(*loaded);
  return true;
}

void bench::printPlan(const plan::Problem &p, const plan::Assignment &a,
                      llvm::StringRef what) {
  llvm::errs() << formatv("  {0}: {1:f3}s\n", what,
                          plan::simulate(p, a).iterationTime);
  for (size_t c = 0; c < p.calls.size(); ++c)
    if (!p.calls[c].host) {
      const plan::Candidate &k = p.cands[c][a[c]];
      std::string extra;
      if (k.s.sp > 1)
        extra += formatv(" sp{0}", k.s.sp).str();
      if (k.s.zero)
        extra += " zero";
      if (k.s.recompute)
        extra += " recompute";
      if (k.s.offload)
        extra += " offload";
      llvm::errs() << formatv(
          "    {0,-22} [{1}:{2}] dp{3} tp{4} pp{5} mbs{6}"
          "{7} {8:f3}s {9:f1}GB\n",
          p.calls[c].label, k.s.firstGpu, k.s.firstGpu + k.devices, k.s.dp,
          k.s.tp, k.s.pp, k.s.microBatches, extra, k.time, k.mem.total() / 1e9);
    }
}

bench::SyncFloor bench::syncFloor(const plan::Problem &p, int64_t nodeLimit) {
  SyncFloor f;
  f.time = plan::iterationBounds(p, plan::Assignment(p.calls.size(), -1)).max();
  if (std::optional<double> r = plan::relaxedFloor(p, nodeLimit, &f.picks)) {
    f.time = std::max(f.time, *r);
    f.relaxed = true;
  }
  return f;
}

double bench::sweepAsync(mlir::rlhf::AlgorithmOp alg,
                         const cost::Calibration &cal, int64_t budget,
                         double current, bool show) {
  auto base = plan::buildProblem(alg, cal, plan::problemOptionsFor(alg));
  if (mlir::failed(base))
    return INFINITY;
  size_t g = 0;
  for (size_t c = 0; c < base->calls.size(); ++c)
    if (base->calls[c].stale > 0)
      g = c;
  std::vector<std::pair<int64_t, int64_t>> meshes;
  for (const plan::Candidate &k : base->cands[g])
    if ((k.s.firstGpu == 0 || k.s.firstGpu + k.devices == base->gpus) &&
        !llvm::is_contained(meshes, std::pair(k.s.firstGpu, k.devices)))
      meshes.push_back({k.s.firstGpu, k.devices});
  llvm::sort(meshes);
  double best = INFINITY;
  for (bool apart : {false, true})
    for (auto [first, count] : meshes) {
      std::vector<std::vector<int>> from;
      plan::Problem q = base->restricted(
          [&](size_t c, const plan::Candidate &k) {
            if (c == g)
              return k.s.firstGpu == first && k.devices == count;
            return !apart || k.s.firstGpu >= first + count ||
                   k.s.firstGpu + k.devices <= first;
          },
          from);
      if (llvm::any_of(llvm::seq(q.calls.size()), [&](size_t c) {
            return !q.calls[c].host && q.cands[c].empty();
          }))
        continue;
      plan::SearchOptions so;
      so.budget = budget;
      auto a = plan::solve(q, plan::Method::Search, so);
      if (!a)
        continue;
      double t = plan::simulate(q, *a).iterationTime;
      best = std::min(best, t);
      llvm::errs() << formatv("  sweep gen [{0}:{1}] {2}: {3:f3}s{4}\n", first,
                              first + count, apart ? "apart" : "anywhere", t,
                              t < current * 0.995 ? "  (faster)" : "");
      if (show)
        printPlan(q, *a, "sweep");
    }
  llvm::errs() << formatv("  sweep best {0:f3}s, search {1:f3}s ({2:f3}x)\n",
                          best, current, current / best);
  return best;
}
