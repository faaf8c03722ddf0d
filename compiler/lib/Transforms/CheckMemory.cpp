//===- CheckMemory.cpp - rlhf-check-memory --------------------------------===//

#include "PassUtils.h"
#include "rlhfc/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"

#include "llvm/Support/FormatVariadic.h"

namespace rlhfc {
#define GEN_PASS_DEF_RLHFCHECKMEMORY
#include "rlhfc/Transforms/Passes.h.inc"
} // namespace rlhfc

using namespace mlir;
using namespace rlhfc;
namespace r = mlir::rlhf;

namespace {

std::string gb(double b) { return llvm::formatv("{0:f1} GB", b / 1e9).str(); }

struct CheckMemory : rlhfc::impl::RLHFCheckMemoryBase<CheckMemory> {
  using RLHFCheckMemoryBase::RLHFCheckMemoryBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto cal = loadCalibrationFor(module, calibration);
    if (failed(cal))
      return signalPassFailure();
    for (auto alg : module.getOps<r::AlgorithmOp>()) {
      auto sim = simulatePlaced(alg, *cal, false);
      if (failed(sim))
        return signalPassFailure();
      const plan::Problem &p = sim->first;
      const plan::SimResult &res = sim->second;
      if (!res.oom)
        continue;
      int64_t g = res.oomGpu;
      // The call with the largest working set on that GPU carries the error;
      // notes name every model resident there.
      const plan::Call *worst = nullptr;
      double worstWork = -1;
      // An ema target keeps fp32 master weights beside its own.
      auto emaTarget = [&](int m) {
        return llvm::any_of(
            p.averages, [&](const plan::Average &e) { return e.target == m; });
      };
      std::map<std::string, std::string> resident;
      std::vector<std::string> offloadable;
      bool replayable = false; // a train call here keeps its activations
      bool shardable = false;  // a train call here keeps all optimizer state
      double offloadFrees = 0; // weights the offloadable models rest here
      for (size_t c = 0; c < p.calls.size(); ++c) {
        const plan::Call &call = p.calls[c];
        if (call.host)
          continue;
        const plan::Candidate &k = p.cands[c][0];
        if (g < k.s.firstGpu || g >= k.s.firstGpu + k.devices)
          continue;
        double work = k.mem.working();
        if (work > worstWork) {
          worstWork = work;
          worst = &call;
        }
        const plan::Model &model = p.models[call.model];
        if (model.offloadable && !k.s.offload) {
          offloadable.push_back("@" + model.name);
          offloadFrees += k.mem.weights;
        }
        bool train = call.shape.kind == cost::CallKind::Train;
        replayable |= train && !k.s.recompute;
        shardable |= train && !k.s.zero && k.s.dp * k.s.sp > 1;
        std::string &line = resident[model.name];
        std::string part =
            llvm::formatv("{0}: weights {1}", call.label, gb(k.mem.weights))
                .str();
        if (line.empty() && emaTarget(call.model))
          part += ", fp32 master weights for its ema " +
                  gb(plan::emaMasterBytes(k.mem.weights));
        if (train)
          part += ", optimizer " + gb(k.mem.optimizer);
        part += ", working set " + gb(work);
        if (train)
          part += " with gradients " + gb(k.mem.grads);
        plan::Assignment all(p.calls.size(), -1);
        for (size_t o = 0; o < p.calls.size(); ++o)
          if (!p.calls[o].host)
            all[o] = 0;
        if (plan::ownsWeightCopy(p, all, c))
          part += llvm::formatv(
                      ", its own copy of the weights (staleness "
                      "{0}), {0} generated batches in flight {1}",
                      p.staleness,
                      gb(double(p.staleness) * call.outBytes / double(k.s.dp)))
                      .str();
        line += (line.empty() ? "" : "; ") + part;
      }
      // A model no call places (an ema's target) rests whole where the
      // runtime parks it; the error then falls on its ema when no call runs
      // on this GPU.
      Operation *anchor = worst ? worst->op : alg.getOperation();
      std::vector<std::string> parkedHere;
      for (size_t m = 0; m < p.models.size(); ++m) {
        const std::optional<plan::Candidate> &k = p.parked[m];
        if (!k || g < k->s.firstGpu || g >= k->s.firstGpu + k->devices)
          continue;
        parkedHere.push_back("@" + p.models[m].name);
        std::string &line = resident[p.models[m].name];
        line = llvm::formatv("placed by no call, so it rests whole on GPU "
                             "{0}: weights {1}",
                             k->s.firstGpu, gb(k->mem.weights));
        if (emaTarget(int(m)))
          line += ", fp32 master weights for its ema " +
                  gb(plan::emaMasterBytes(k->mem.weights)) +
                  ", and while the ema runs the source's weights " +
                  gb(k->mem.weights);
        if (!worst)
          for (const plan::Average &e : p.averages)
            if (e.target == int(m) || e.source == int(m))
              anchor = e.op;
      }
      int64_t node = g / p.hw.gpusPerNode;
      const double over = res.peakMemory[g] - p.memoryLimit;
      std::string offload =
          offloadable.empty()
              ? "or offload a frozen model"
              : "or offload " + llvm::join(offloadable, " or ") +
                    " (@place(..., offload = true))" +
                    (offloadFrees < over
                         ? " (which frees only " + gb(offloadFrees) +
                               " of the " + gb(over) + " over)"
                         : "");
      // Smaller working sets cannot help when what rests here between
      // calls is already over.
      const double resting = res.peakMemory[g] - std::max(0.0, worstWork);
      std::string first =
          resting > p.memoryLimit
              ? "the weights and optimizer state resting here need " +
                    gb(resting) +
                    " alone, so smaller batches cannot help; spread the "
                    "models over more GPUs (larger meshes, more tp or pp), "
              : "use more GPUs, more micro-batches or minibatches, ";
      // No call runs here: what is over is a parked model and its ema,
      // which no batch size or mesh of a call changes.
      if (!worst && !parkedHere.empty()) {
        first = "no call runs here, and " + llvm::join(parkedHere, " and ") +
                " (placed by no call) rest" +
                (parkedHere.size() == 1 ? "s" : "") +
                " whole on one GPU with the ema's working set; give " +
                (parkedHere.size() == 1 ? "it a call" : "each a call") +
                " (an inference, say), whose layout then shards it";
        offload.clear();
      }
      auto diag = plan::emitCallError(anchor) << llvm::formatv(
                      "predicted out of memory on GPU {0} (node {1}, "
                      "local GPU {2}): {3} needed, {4} available per {5}; "
                      "{9}{6}{7}{8}",
                      g, node, g % p.hw.gpusPerNode, gb(res.peakMemory[g]),
                      gb(p.memoryLimit), p.hw.name,
                      shardable ? "shard optimizer state over data "
                                  "parallelism (@place(..., zero = true)), "
                                : "",
                      replayable && resting <= p.memoryLimit
                          ? "recompute activations in training "
                            "(@place(..., recompute = true)), "
                          : "",
                      offload, first);
      for (auto &[model, line] : resident)
        diag.attachNote(anchor->getLoc())
            << "resident on GPU " << g << ": @" << model << " (" << line << ")";
      return signalPassFailure();
    }
  }
};

} // namespace
