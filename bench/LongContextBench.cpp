//===- LongContextBench.cpp - searched plans vs heuristic at long context -===//
//
// GRPO and PPO with LLaMA-3.1 8B and 70B actors generating 8K, 16K and 32K
// tokens after 1K-token prompts, on 2 to 16 nodes of 8 H100s (#27). For
// each setting it prints the predicted iteration time of the Megatron-style
// symmetric heuristic, allowed the memory savers it needs (ZeRO,
// recomputation, sequence parallelism, before deeper pipelines), and of the
// search as rlhfc runs it, the speedup, the search's wall time and the
// actor's training strategy under each. Then how many settings each can fit
// at all, and last the geometric-mean speedup over the settings both fit.
// --ceiling adds a floor under every plan and the heuristic's time over it,
// the most any plan could gain under the cost model.
// docs/benchmarks.md records the table and the settings' rationale.
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"

#include "rlhfc/Planner/Planner.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace rlhfc;
using namespace rlhfc::bench;
using llvm::formatv;

static llvm::cl::OptionCategory benchCat("rlhf-bench-long-context options");
static CommonOptions common(
    benchCat, "only the 8K generation length",
    "also print, per setting, the generate call's fastest candidate, a floor "
    "under any plan's iteration time (the optimum of a relaxed problem "
    "without placement or reallocations; * where that ran out of nodes and "
    "iterationBounds alone remain), and the speedup over the heuristic that "
    "no plan can exceed under the cost model");

static llvm::cl::opt<bool>
    show("show", llvm::cl::desc("print each plan's calls to stderr"),
         llvm::cl::cat(benchCat));

namespace {

struct Setting {
  bool ppo;
  int actor, gpus;
};

constexpr int kPromptLen = 1024, kSamples = 8;

/// GRPO: 8 samples per prompt scored by an 8B reward model, KL to a frozen
/// reference of the actor's size. PPO: one sample per prompt, an 8B critic
/// and reward model. Sequences per iteration halve as generation doubles,
/// so an iteration holds about 1.1M tokens (ReaLHF's largest settings,
/// 512 x (128 + 896), hold 0.5M).
std::string program(const Setting &s, int gen) {
  const int sequences = 128 * 8192 / gen;
  const int prompts = s.ppo ? sequences : sequences / kSamples;
  std::string head = formatv(R"(import "hardware/nvidia.rlhf";
import "models/llama3.rlhf";
cluster c : H100_SXM {{ nodes = {0}; gpus_per_node = 8; }
model actor : llama3_1_{1}b {{ trainable; }
model ref : llama3_1_{1}b {{ }
model reward : llama3_1_8b {{ head = value; }
dataset prompts {{ path = "p.jsonl"; batch = {2}; max_prompt_len = {3}; fields = [prompt]; }
)",
                             s.gpus / 8, s.actor, prompts, kPromptLen)
                         .str();
  if (!s.ppo)
    return head +
           formatv(
               R"(algorithm grpo(actor: model, ref: model, reward: model, p: dataset) {{
  g   = actor.generate(p.prompt, max_new_tokens = {0}, n = {1});
  r   = reward.inference(g.seq);
  lr  = ref.inference(g.seq);
  adv = grpo_adv(r, group = {1});
  actor.train(grpo_loss(g, adv, lr, kl = 0.04), minibatches = 4);
}
run grpo(actor, ref, reward, prompts) {{ steps = 1; }
)",
               gen, kSamples)
               .str();
  return head +
         formatv(R"(model critic : llama3_1_8b {{ trainable; head = value; }
algorithm ppo(actor: model, critic: model, ref: model, reward: model, p: dataset) {{
  g   = actor.generate(p.prompt, max_new_tokens = {0});
  r   = reward.inference(g.seq);
  lr  = ref.inference(g.seq);
  v   = critic.inference(g.seq);
  adv = gae(r, v, g.logprobs, lr, gamma = 1.0, lam = 0.95, kl = 0.1);
  actor.train(ppo_actor_loss(g, adv, clip = 0.2), minibatches = 4);
  critic.train(ppo_value_loss(v, adv, clip = 0.2), minibatches = 4);
}
run ppo(actor, critic, ref, reward, prompts) {{ steps = 1; }
)",
                 gen)
             .str();
}

/// The actor's train strategy in a plan, as "dp2 tp8 sp4 +z+r".
std::string actorTrain(const plan::Problem &p,
                       const std::optional<plan::Assignment> &a) {
  if (!a)
    return "-";
  for (size_t c = 0; c < p.calls.size(); ++c) {
    if (p.calls[c].host || p.calls[c].shape.kind != cost::CallKind::Train ||
        p.models[p.calls[c].model].name != "actor")
      continue;
    const cost::Strategy &s = p.cands[c][(*a)[c]].s;
    std::string out = formatv("{0}:dp{1}tp{2}", s.devices(), s.dp, s.tp).str();
    if (s.pp > 1)
      out += formatv("pp{0}", s.pp).str();
    if (s.sp > 1)
      out += formatv("sp{0}", s.sp).str();
    if (s.zero)
      out += "+z";
    if (s.recompute)
      out += "+r";
    return out;
  }
  return "-";
}

} // namespace

int main(int argc, char **argv) {
  cost::Calibration cal;
  if (!common.parse(argc, argv,
                    "rlhfc long-context planner benchmark: predicted GRPO and "
                    "PPO iteration\n"
                    "times of the searched plan and of the Megatron-style "
                    "heuristic with\n"
                    "memory savers, LLaMA-3.1 8B and 70B actors, 8K-32K "
                    "generation, 16-128\n"
                    "H100s. Results are recorded in docs/benchmarks.md.\n",
                    "rlhf-bench-long-context", cal))
    return 1;
  const std::vector<Setting> settings = {
      {false, 8, 16},  {false, 8, 32},   {true, 8, 32},  {true, 8, 64},
      {false, 70, 64}, {false, 70, 128}, {true, 70, 64}, {true, 70, 128},
  };
  const int gens[] = {8192, 16384, 32768};
  llvm::outs() << formatv("{0,-10} {1,5} {2,6} {3,5} | {4,9} {5,9} {6,8} | "
                          "{7,8} | {8,-18} {9,-18}",
                          "algorithm", "GPUs", "gen", "seqs", "heuristic",
                          "search", "speedup", "search s", "heuristic actor",
                          "search actor");
  if (common.ceiling)
    llvm::outs() << formatv(" | {0,8} {1,8} {2,8} {3,8} {4,7} {5,7}",
                            "best gen", "cycle", "area", "floor", "ceiling",
                            "floor s");
  llvm::outs() << "\n";
  double logSum = 0, logCeiling = 0;
  int both = 0, heurFits = 0, searchFits = 0, total = 0;
  for (size_t si = 0; si < settings.size(); ++si)
    for (int gi = 0; gi < (common.quick ? 1 : 3); ++gi) {
      if (common.only >= 0 && size_t(common.only) != si)
        continue;
      const Setting &s = settings[si];
      const int gen = gens[gi];
      mlir::MLIRContext ctx;
      // Plans that do not fit are a result here, not an error to print.
      mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic &d) {
        if (show)
          llvm::errs() << d << "\n";
        return mlir::success();
      });
      auto module = lower(ctx, program(s, gen));
      if (!module) {
        llvm::errs() << "rlhf-bench-long-context: error: setting " << si
                     << " does not lower\n";
        return 1;
      }
      auto alg = *module->getOps<mlir::rlhf::AlgorithmOp>().begin();
      ++total;
      // Both plan the same problem, with every memory saver offered to every
      // train call (rlhfc offers them only when nothing fits without).
      plan::ProblemOptions withSavers;
      withSavers.trainSavers = true;
      auto t0 = std::chrono::steady_clock::now();
      auto p = plan::buildProblem(alg, cal, withSavers);
      double heur = INFINITY, search = INFINITY, wall = 0;
      std::string heurActor = "-", searchActor = "-";
      double bestGen = INFINITY, floor = INFINITY, floorWall = 0;
      plan::IterationBounds fastest;
      bool relaxed = false;
      if (mlir::succeeded(p)) {
        plan::SearchOptions so;
        so.budget = common.budget;
        auto a = plan::solve(*p, plan::Method::Search, so);
        wall = secondsSince(t0);
        if (a) {
          search = plan::simulate(*p, *a).iterationTime;
          searchActor = actorTrain(*p, a);
          if (show)
            printPlan(*p, *a, "search");
        }
        plan::SearchOptions ho;
        ho.heuristicSavers = true;
        auto h = plan::solve(*p, plan::Method::Heuristic, ho);
        if (h) {
          heur = plan::simulate(*p, *h).iterationTime;
          heurActor = actorTrain(*p, h);
          if (show)
            printPlan(*p, *h, "heuristic");
        }
        if (common.ceiling) {
          // The floor's model cycle holds the generate call, so it is never
          // below the fastest generation.
          for (size_t c = 0; c < p->calls.size(); ++c)
            if (!p->calls[c].host &&
                p->calls[c].shape.kind == cost::CallKind::Generate)
              bestGen = std::min(bestGen, p->fastestTime(c));
          fastest =
              plan::iterationBounds(*p, plan::Assignment(p->calls.size(), -1));
          auto f0 = std::chrono::steady_clock::now();
          SyncFloor f = syncFloor(*p, common.floorNodes);
          floorWall = secondsSince(f0);
          floor = f.time;
          relaxed = f.relaxed;
          if (show && !f.picks.empty())
            printPlan(*p, f.picks,
                      "relaxed floor's picks (placement not checked)");
        }
      }
      auto sec = [](double v) {
        return std::isfinite(v) ? formatv("{0:f1}s", v).str()
                                : std::string("OOM");
      };
      bool hf = std::isfinite(heur), sf = std::isfinite(search);
      heurFits += hf;
      searchFits += sf;
      std::string speedup =
          hf && sf ? formatv("{0:f2}x", heur / search).str() : "-";
      const int sequences = 128 * 8192 / gen;
      llvm::outs() << formatv(
          "{0,-10} {1,5} {2,6} {3,5} | {4,9} {5,9} {6,8} | {7,8:f1} | {8,-18} "
          "{9,-18}",
          formatv("{0} {1}B", s.ppo ? "PPO" : "GRPO", s.actor).str(), s.gpus,
          formatv("{0}K", gen / 1024).str(), sequences, sec(heur), sec(search),
          speedup, wall, heurActor, searchActor);
      if (common.ceiling)
        llvm::outs() << formatv(
            " | {0,8} {1,8} {2,8} {3,8} {4,7} {5,7:f1}", sec(bestGen),
            sec(fastest.cycle), sec(fastest.area),
            sec(floor) + (relaxed ? " " : "*"),
            hf ? formatv("{0:f2}x", heur / floor).str() : "-", floorWall);
      llvm::outs() << "\n";
      llvm::outs().flush();
      if (hf && sf) {
        logSum += std::log(heur / search);
        logCeiling += std::log(heur / floor);
        ++both;
      }
    }
  llvm::outs() << formatv("settings that fit: heuristic {0} of {1}, search {2} "
                          "of {1}, both {3}\n",
                          heurFits, total, searchFits, both);
  if (common.ceiling)
    llvm::outs() << formatv("geomean long-context ceiling (no plan beats it): "
                            "{0:f2}\n",
                            std::exp(logCeiling / std::max(1, both)));
  llvm::outs() << formatv("geomean long-context search/heuristic speedup: "
                          "{0:f2}\n",
                          std::exp(logSum / std::max(1, both)));
  return 0;
}
