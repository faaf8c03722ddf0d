//===- PlannerBench.cpp - searched plans vs baselines, ReaLHF settings ----===//
//
// The weak-scaling settings of ReaLHF (arXiv 2406.14088): PPO with LLaMA
// actor/critic pairs on H100 nodes of 8, prompt 128 tokens, generation 128,
// 384 or 896 with batch 512, 256 or 128. For each setting it prints the
// predicted iteration time of the heuristic, colocated and separated
// baselines and of the search, the speedups, and the search's wall time.
// The last line is the geometric-mean speedup of search over heuristic.
//
//===----------------------------------------------------------------------===//

#include "PlannerBench.h"
#include "BenchSupport.h"

#include "rlhfc/Planner/Planner.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <limits>

using namespace rlhfc;
using namespace rlhfc::bench;
using llvm::formatv;

static llvm::cl::OptionCategory benchCat("rlhf-bench-planner options");
static CommonOptions common(
    benchCat, "only the first gen length per setting",
    "also print, per setting, a floor under any plan's iteration time (the "
    "proven optimum, else the optimum of a relaxed problem without placement "
    "or reallocations), and the speedup over the heuristic that no plan can "
    "exceed under the cost model");

static llvm::cl::opt<double> exactSeconds(
    "exact-seconds",
    llvm::cl::desc(
        "time cap of the exact search per setting (see --exact-gpus; "
        "0: none)"),
    llvm::cl::init(120), llvm::cl::cat(benchCat));
static llvm::cl::opt<int> exactGpus(
    "exact-gpus",
    llvm::cl::desc("run the exact search on settings of at most this many "
                   "GPUs (larger ones seldom finish within hours)"),
    llvm::cl::init(16), llvm::cl::cat(benchCat));
static llvm::cl::opt<bool> scale(
    "scale",
    llvm::cl::desc("instead of the settings, time the search for PPO with "
                   "four LLaMA-2 70B models on 8 to 512 nodes of 8 H100s"),
    llvm::cl::cat(benchCat));
static llvm::cl::list<int>
    scaleNodes("scale-nodes",
               llvm::cl::desc("node counts for --scale (default 8,16,...,512)"),
               llvm::cl::CommaSeparated, llvm::cl::cat(benchCat));
static llvm::cl::opt<bool> async(
    "async",
    llvm::cl::desc("instead of the baselines, plan every setting with "
                   "staleness 1 and compare the searched asynchronous plan "
                   "with the synchronous heuristic and search (with --scale: "
                   "the scale programs, async beside sync)"),
    llvm::cl::cat(benchCat));
static llvm::cl::opt<bool> asyncSweep(
    "async-sweep",
    llvm::cl::desc("with --async: also search with the generator fixed on "
                   "each of its meshes at an edge of the cluster, the other "
                   "calls anywhere or apart, and print the best (to stderr)"),
    llvm::cl::cat(benchCat));
static llvm::cl::opt<bool>
    show("show", llvm::cl::desc("print each plan's calls to stderr"),
         llvm::cl::cat(benchCat));

std::string bench::program(int actor, int critic, int gpus, int gen,
                           int batch) {
  return formatv(R"(import "hardware/nvidia.rlhf";
import "models/llama2.rlhf";
cluster c : H100_SXM {{ nodes = {0}; gpus_per_node = {1}; }
model actor : llama2_{2}b {{ trainable; }
model critic : llama2_{3}b {{ trainable; head = value; }
model ref : llama2_{2}b {{ }
model reward : llama2_{3}b {{ head = value; }
dataset prompts {{ path = "p.jsonl"; batch = {4}; max_prompt_len = 128; fields = [prompt]; }
algorithm ppo(actor: model, critic: model, ref: model, reward: model, p: dataset) {{
  g   = actor.generate(p.prompt, max_new_tokens = {5});
  r   = reward.inference(g.seq);
  lr  = ref.inference(g.seq);
  v   = critic.inference(g.seq);
  adv = gae(r, v, g.logprobs, lr, gamma = 1.0, lam = 0.95, kl = 0.1);
  actor.train(ppo_actor_loss(g, adv, clip = 0.2), minibatches = 4);
  critic.train(ppo_value_loss(v, adv, clip = 0.2), minibatches = 4);
}
run ppo(actor, critic, ref, reward, prompts) {{ steps = 1; }
)",
                 std::max(1, gpus / 8), std::min(gpus, 8), actor, critic, batch,
                 gen)
      .str();
}

void bench::makeAsync(mlir::rlhf::AlgorithmOp alg, int64_t k) {
  mlir::Builder b(alg.getContext());
  alg->setAttr(alg.getStalenessAttrName(), b.getI64IntegerAttr(k));
  mlir::SymbolTable symbols(alg->getParentOfType<mlir::ModuleOp>());
  alg.walk([&](mlir::rlhf::GenerateOp g) {
    auto model = symbols.lookup<mlir::rlhf::ModelOp>(g.getModel());
    if (model && model.getTrainable())
      g->setAttr(g.getStalenessAttrName(), b.getI64IntegerAttr(k));
  });
}

namespace {

struct Setting {
  int actor, critic, gpus;
};

/// Each setting lowered to MLIR, at the three generation lengths (the
/// first only with --quick; only setting --only when given): `f(setting,
/// generation length, algorithm)`. False when a lowering or `f` fails.
bool forEachSetting(
    const std::vector<Setting> &settings,
    llvm::function_ref<bool(const Setting &, int, mlir::rlhf::AlgorithmOp)> f) {
  const int gens[] = {128, 384, 896}, batches[] = {512, 256, 128};
  for (size_t si = 0; si < settings.size(); ++si)
    for (int gi = 0; gi < (common.quick ? 1 : 3); ++gi) {
      const Setting &s = settings[si];
      if (common.only >= 0 && size_t(common.only) != si)
        continue;
      mlir::MLIRContext ctx;
      mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic &d) {
        llvm::errs() << d << "\n";
        return mlir::success();
      });
      auto module =
          lower(ctx, program(s.actor, s.critic, s.gpus, gens[gi], batches[gi]));
      if (!module ||
          !f(s, gens[gi], *module->getOps<mlir::rlhf::AlgorithmOp>().begin()))
        return false;
    }
  return true;
}

/// The 33 settings with staleness 1: the searched asynchronous plan against
/// the synchronous heuristic and the synchronous search. Per setting it
/// prints the three iteration times, the speedups, how the async plan
/// splits the GPUs (generation's GPUs of all), the generation's and the
/// weight update's time per iteration, the search's wall time, and a floor
/// under every async plan (plan::asyncFloor). A searched or swept plan
/// below that floor is an error.
int asyncBench(const cost::Calibration &cal,
               const std::vector<Setting> &settings) {
  llvm::outs() << formatv(
      "{0,-16} {1,5} {2,5} | {3,9} {4,9} {5,9} | {6,8} {7,8} | {8,9} {9,7} "
      "{10,7} {11,8} {12,8} {13,8}\n",
      "actor+critic", "GPUs", "gen", "sync heur", "sync srch", "async k1",
      "vs heur", "vs srch", "gen GPUs", "gen s", "update", "search s", "area",
      "floor");
  double logHeur = 0, logSearch = 0, logFloor = 0;
  int count = 0, betterThanSearch = 0;
  bool ok = forEachSetting(settings, [&](const Setting &s, int gen,
                                         mlir::rlhf::AlgorithmOp alg) {
    plan::SearchOptions so;
    so.budget = common.budget;
    auto sync = plan::planAlgorithm(alg, cal, plan::Method::Search, so);
    if (mlir::failed(sync))
      return false;
    const plan::Problem &sp = sync->problem;
    auto heurPlan = plan::solve(sp, plan::Method::Heuristic);
    auto timeIn = [](const plan::Problem &p,
                     const std::optional<plan::Assignment> &a) {
      return a ? plan::simulate(p, *a).iterationTime : INFINITY;
    };
    double heur = timeIn(sp, heurPlan), search = timeIn(sp, sync->assignment);
    makeAsync(alg, 1);
    auto t0 = std::chrono::steady_clock::now();
    auto asyncPlanned = plan::planAlgorithm(alg, cal, plan::Method::Search, so);
    double wall = secondsSince(t0);
    if (mlir::failed(asyncPlanned))
      return false;
    const plan::Problem &ap = asyncPlanned->problem;
    const std::optional<plan::Assignment> &aa = asyncPlanned->assignment;
    double asyncTime = timeIn(ap, aa);
    double swept = asyncSweep
                       ? sweepAsync(alg, cal, common.budget, asyncTime, show)
                       : INFINITY;
    // No plan, async or not, beats every call at its least GPU-seconds
    // spread over the whole cluster (memory and placement ignored).
    double area = 0;
    for (size_t c = 0; c < ap.calls.size(); ++c)
      if (!ap.calls[c].host)
        area += ap.leastArea(c);
    area /= double(ap.gpus);
    auto t1 = std::chrono::steady_clock::now();
    std::optional<plan::AsyncFloor> af =
        plan::asyncFloor(ap, common.floorNodes);
    double floorWall = secondsSince(t1);
    if (!af) {
      llvm::errs() << formatv("error: the async floor ran past {0} nodes\n",
                              common.floorNodes.getValue());
      return false;
    }
    double floor = af->time;
    // The floor lies under every async plan; a searched or swept plan below
    // it means a bound assumes what the simulator does not.
    for (double t : {asyncTime, swept})
      if (t < floor * (1 - 1e-9)) {
        llvm::errs() << formatv("error: {0}B+{1}B {2} GPUs gen {3}: an async "
                                "plan takes {4:f4}s, under the floor {5:f4}s\n",
                                s.actor, s.critic, s.gpus, gen, t, floor);
        return false;
      }
    std::string split = "-", genTime = "-", update = "-";
    if (aa) {
      plan::SimResult sim = plan::simulate(ap, *aa, 3, /*record=*/true);
      for (size_t c = 0; c < ap.calls.size(); ++c)
        if (!ap.calls[c].host &&
            ap.calls[c].shape.kind == cost::CallKind::Generate) {
          const plan::Candidate &k = ap.cands[c][(*aa)[c]];
          split = formatv("{0}/{1}", k.devices, ap.gpus).str();
          genTime = formatv("{0:f2}", k.time).str();
        }
      double upd = 0;
      int its = 0;
      for (const plan::Event &e : sim.events)
        if (e.kind == plan::Event::Update && e.iteration == 1) {
          upd = e.end - e.start;
          ++its;
        }
      update = its ? formatv("{0:f2}", upd).str() : std::string("none");
    }
    if (show) {
      llvm::errs() << formatv("{0}B+{1}B {2} GPUs gen {3}\n", s.actor, s.critic,
                              s.gpus, gen);
      // Where the floor lies: the stale generate's and its trainer's (its
      // model's last other call) candidates, and the three terms there.
      size_t g = 0;
      int t = -1;
      for (size_t c = 0; c < ap.calls.size(); ++c)
        if (ap.calls[c].stale > 0)
          g = c;
      for (size_t c = 0; c < ap.calls.size(); ++c)
        if (c != g && !ap.calls[c].host &&
            ap.calls[c].model == ap.calls[g].model)
          t = int(c);
      auto where = [&](int c, int k) {
        if (c < 0 || k < 0)
          return std::string("-");
        const plan::Candidate &x = ap.cands[c][k];
        return formatv("[{0}:{1}] {2:f3}s", x.s.firstGpu,
                       x.s.firstGpu + x.devices, x.time)
            .str();
      };
      llvm::errs() << formatv("  async floor {0:f3}s: generate {1}, train {2}; "
                              "busiest GPU {3:f3}s, area {4:f3}s, rate "
                              "{5:f3}s ({6:f2} s)\n",
                              floor, where(int(g), af->generator),
                              where(t, af->trainer), af->busiest, af->area,
                              af->rate, floorWall);
      if (heurPlan)
        printPlan(sp, *heurPlan, "sync heuristic");
      if (sync->assignment)
        printPlan(sp, *sync->assignment, "sync search");
      if (aa)
        printPlan(ap, *aa, "async search (k=1)");
    }
    auto sec = [](double v) {
      return std::isfinite(v) ? formatv("{0:f2}s", v).str()
                              : std::string("OOM");
    };
    llvm::outs() << formatv(
        "{0,-16} {1,5} {2,5} | {3,9} {4,9} {5,9} | {6,7:f2}x {7,7:f2}x | "
        "{8,9} {9,7} {10,7} {11,8:f2} {12,7:f2}s {13,7:f2}s\n",
        formatv("{0}B+{1}B", s.actor, s.critic).str(), s.gpus, gen, sec(heur),
        sec(search), sec(asyncTime), heur / asyncTime, search / asyncTime,
        split, genTime, update, wall, area, floor);
    llvm::outs().flush();
    if (std::isfinite(heur) && std::isfinite(search) &&
        std::isfinite(asyncTime)) {
      logHeur += std::log(heur / asyncTime);
      logSearch += std::log(search / asyncTime);
      logFloor += std::log(heur / floor);
      ++count;
      betterThanSearch += asyncTime < search * 0.995;
    }
    return true;
  });
  if (!ok)
    return 1;
  llvm::outs() << formatv("async(k=1) faster than the sync search by over "
                          "0.5% in {0} of {1} settings\n",
                          betterThanSearch, count);
  llvm::outs() << formatv("geomean sync heuristic/async floor (no async plan "
                          "exceeds it): {0:f2}\n",
                          std::exp(logFloor / std::max(1, count)));
  llvm::outs() << formatv(
      "geomean async(k=1) search/sync heuristic speedup: {0:f2}\n",
      std::exp(logHeur / std::max(1, count)));
  llvm::outs() << formatv(
      "geomean async(k=1) search/sync search speedup: {0:f2}\n",
      std::exp(logSearch / std::max(1, count)));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  cost::Calibration cal;
  if (!common.parse(
          argc, argv,
          "rlhfc planner benchmark: predicted PPO iteration times of the "
          "heuristic,\n"
          "colocated, separated and searched plans over ReaLHF's weak-scaling\n"
          "settings (H100 nodes of 8 GPUs), the search's wall time, and at 8 "
          "and\n"
          "16 GPUs the exact branch-and-bound optimum and the search's gap to "
          "it.\n"
          "Results are recorded in docs/benchmarks.md.\n",
          "rlhf-bench-planner", cal))
    return 1;
  if (scale) {
    std::vector<int> nodes(scaleNodes.begin(), scaleNodes.end());
    return async ? scaleAsyncBench(cal, nodes, common.budget)
                 : scaleBench(cal, nodes, common.budget);
  }
  std::vector<Setting> settings = {
      {7, 7, 8},   {13, 7, 16},  {34, 7, 32},  {70, 7, 64},   // actor scaling
      {7, 13, 16}, {7, 34, 32},  {7, 70, 64},                 // critic scaling
      {7, 7, 16},  {13, 13, 32}, {34, 34, 64}, {70, 70, 128}, // both
  };
  if (async)
    return asyncBench(cal, settings);
  llvm::outs() << formatv(
      "{0,-16} {1,5} {2,5} | {3,9} {4,9} {5,9} {6,9} | {7,8} "
      "{8,8} | {9,8} {10,7} | {11,9} {12,6} {13,8}\n",
      "actor+critic", "GPUs", "gen", "heuristic", "colocated", "separated",
      "search", "vs best", "vs heur", "search s", "space", "optimum", "gap",
      "exact s");
  double logSum = 0, logCeiling = 0;
  int count = 0;
  bool ok = forEachSetting(settings, [&](const Setting &s, int gen,
                                         mlir::rlhf::AlgorithmOp alg) {
    // The search as rlhfc runs it (offloading only where nothing fits
    // without); the baselines and the exact search price the same problem.
    plan::SearchOptions so;
    so.budget = common.budget;
    auto t0 = std::chrono::steady_clock::now();
    auto planned = plan::planAlgorithm(alg, cal, plan::Method::Search, so);
    double wall = secondsSince(t0);
    if (mlir::failed(planned))
      return false;
    const plan::Problem *p = &planned->problem;
    const std::optional<plan::Assignment> &searched = planned->assignment;
    auto print = [&](llvm::StringRef what, const plan::Assignment &a) {
      printPlan(*p, a,
                formatv("{0}B+{1}B {2} GPUs gen {3}, {4}", s.actor, s.critic,
                        s.gpus, gen, what)
                    .str());
    };
    auto timeOf = [&](plan::Method m) {
      auto a = plan::solve(*p, m, so);
      static const char *names[] = {"search", "heuristic", "colocated",
                                    "separated", "manual"};
      if (show && a)
        print(names[int(m)], *a);
      return a ? plan::simulate(*p, *a).iterationTime : INFINITY;
    };
    double heur = timeOf(plan::Method::Heuristic);
    double colo = timeOf(plan::Method::Colocated);
    double sep = timeOf(plan::Method::Separated);
    if (show && searched)
      print("search", *searched);
    double search =
        searched ? plan::simulate(*p, *searched).iterationTime : INFINITY;
    double best = std::min({heur, colo, sep});
    // The proven optimum where the exact search finishes in time; it
    // starts from the search's plan as its incumbent.
    std::string optimum = "-", gap = "-", exactWall = "-";
    double proven = INFINITY;
    if (s.gpus <= exactGpus) {
      const std::optional<plan::Assignment> &a = searched;
      plan::ExactOptions eo;
      eo.nodeLimit = std::numeric_limits<int64_t>::max();
      eo.timeLimit = exactSeconds;
      plan::ExactStats es;
      auto e0 = std::chrono::steady_clock::now();
      auto opt = plan::exactSearch(*p, eo, es, a ? &*a : nullptr);
      if (show && opt && es.proven)
        print("optimum", *opt);
      double ew = secondsSince(e0);
      if (es.proven) {
        proven = es.bestTime;
        optimum = formatv("{0:f2}s", es.bestTime).str();
        gap = formatv("{0:f1}%", 100.0 * (search - es.bestTime) / es.bestTime)
                  .str();
        exactWall = formatv("{0:f1}", ew).str();
      } else {
        optimum = formatv("skipped (>{0} s)", exactSeconds.getValue()).str();
      }
    }
    double space = 1;
    for (size_t c = 0; c < p->calls.size(); ++c)
      if (!p->calls[c].host)
        space *= double(p->cands[c].size());
    auto sec = [](double v) {
      return std::isfinite(v) ? formatv("{0:f2}s", v).str()
                              : std::string("OOM");
    };
    llvm::outs() << formatv("{0,-16} {1,5} {2,5} | {3,9} {4,9} {5,9} {6,9} | "
                            "{7,7:f2}x {8,7:f2}x | {9,8:f2} {10,7:e1} | {11,9} "
                            "{12,6} {13,8}\n",
                            formatv("{0}B+{1}B", s.actor, s.critic).str(),
                            s.gpus, gen, sec(heur), sec(colo), sec(sep),
                            sec(search), best / search, heur / search, wall,
                            space, optimum, gap, exactWall);
    // Rows can be minutes apart (--exact-seconds); show each as it ends
    // even when stdout is a file.
    llvm::outs().flush();
    if (std::isfinite(heur) && std::isfinite(search)) {
      logSum += std::log(heur / search);
      ++count;
    }
    if (common.ceiling) {
      // The proven optimum where the exact search finished, else the
      // relaxed problem's optimum (admissible: no plan's time is lower).
      double floor = proven;
      if (!std::isfinite(floor)) {
        SyncFloor f = syncFloor(*p, common.floorNodes);
        floor = f.time;
        if (show && !f.picks.empty())
          print("relaxed floor's picks (placement not checked)", f.picks);
      }
      llvm::outs() << formatv("  floor {0:f2}s, ceiling {1:f2}x\n", floor,
                              heur / floor);
      llvm::outs().flush();
      logCeiling += std::log(heur / floor);
    }
    return true;
  });
  if (!ok)
    return 1;
  llvm::outs() << formatv("geomean search/heuristic speedup: {0:f2}\n",
                          std::exp(logSum / std::max(1, count)));
  if (common.ceiling)
    llvm::outs() << formatv("geomean ceiling (no plan beats it): {0:f2}\n",
                            std::exp(logCeiling / std::max(1, count)));
  return 0;
}
