//===- FromIR.cpp - cost-model inputs from rlhf IR ------------------------===//

#include "rlhfc/CostModel/FromIR.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdio>

using namespace rlhfc::cost;
using namespace mlir;
namespace r = mlir::rlhf;

Hardware rlhfc::cost::hardwareOf(r::ClusterOp c, const Calibration &cal) {
  r::HardwareAttr h = c.getHardware();
  Hardware hw;
  hw.name = h.getName().str();
  hw.flops = h.getBf16Flops().convertToDouble();
  hw.hbmBytes = h.getHbm().convertToDouble();
  hw.hbmBw = h.getHbmBandwidth().convertToDouble();
  hw.nvlinkBw = h.getNvlinkBandwidth().convertToDouble();
  hw.networkBw = h.getNetworkBandwidth().convertToDouble();
  hw.hostBw = h.getHostBandwidth().convertToDouble();
  hw.gpusPerNode = c.getGpusPerNode();
  auto it = cal.find(hw.name);
  hw.eff = it != cal.end() ? it->second : defaultEfficiency(hw.name);
  return hw;
}

Arch rlhfc::cost::archOf(r::ModelOp m) {
  r::ArchAttr a = m.getArch();
  return Arch::get(a.getShape(m.getHead() == r::Head::value), a.getMaxSeq());
}

/// " x1.5" after a call that dynamic sampling repeats (its time is the
/// rounds'), noted in `repeated`; else "".
static std::string timesLabel(double repeats, bool &repeated) {
  if (repeats == 1.0)
    return "";
  repeated = true;
  return llvm::formatv(" x{0}", repeats).str();
}

CallShape rlhfc::cost::shapeOf(Operation *call, r::ModelOp model) {
  CallShape c;
  c.trainable = model.getTrainable();
  c.repeats = r::expectedRounds(call);
  auto dims = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  if (auto g = dyn_cast<r::GenerateOp>(call)) {
    c.kind = CallKind::Generate;
    c.batch = dims(g.getPrompt())[0] * g.getN();
    c.promptLen = dims(g.getPrompt())[1];
    c.genLen = g.getMaxNewTokens();
    c.greedy = g.getGreedy();
  } else if (auto i = dyn_cast<r::InferenceOp>(call)) {
    c.kind = CallKind::Inference;
    c.batch = dims(i.getSeq())[0];
    c.seqLen = dims(i.getSeq())[1];
  } else if (auto t = dyn_cast<r::TrainStepOp>(call)) {
    c.kind = CallKind::Train;
    c.batch = dims(t.getInputs().front())[0];
    c.seqLen = 1;
    for (Value v : t.getInputs())
      if (dims(v).size() == 2)
        c.seqLen = std::max<int64_t>(c.seqLen, dims(v)[1]);
    c.minibatches = t.getMinibatches();
    c.epochs = t.getEpochs();
    // One forward pass per token input the loss reads the model on
    // (rlhf-simplify-fns has merged repeated reads): two for DPO's pairs.
    llvm::SmallPtrSet<Value, 2> seqs;
    t.getBody().walk([&](r::ModelOutputOp m) { seqs.insert(m.getTokens()); });
    c.forwards = std::max<int64_t>(1, int64_t(seqs.size()));
  }
  return c;
}

Strategy rlhfc::cost::strategyFrom(r::MeshAttr mesh, r::StrategyAttr st) {
  Strategy s;
  s.firstGpu = mesh.getFirst();
  s.dp = st.getDp();
  s.tp = st.getTp();
  s.pp = st.getPp();
  s.microBatches = st.getMbs();
  s.zero = st.getZero();
  s.recompute = st.getRecompute();
  s.offload = st.getOffload();
  s.sp = st.getSp();
  return s;
}

std::optional<Strategy> rlhfc::cost::strategyOf(Operation *call) {
  auto mesh = call->getAttrOfType<r::MeshAttr>("mesh");
  auto st = call->getAttrOfType<r::StrategyAttr>("strategy");
  if (!mesh || !st)
    return std::nullopt;
  return strategyFrom(mesh, st);
}

Strategy rlhfc::cost::defaultStrategy(const Arch &arch, const Hardware &hw,
                                      int64_t gpus, const CallShape &shape) {
  Strategy s;
  int64_t tp = 1;
  // tp divides the kv heads too, as @place and the planner require.
  while (tp * 2 <= std::min<int64_t>(hw.gpusPerNode, gpus) &&
         arch.shape.heads % (tp * 2) == 0 &&
         arch.shape.kvHeads % (tp * 2) == 0 && gpus % (tp * 2) == 0)
    tp *= 2;
  s.tp = tp;
  s.dp = gpus / tp;
  // The batch must split over dp (and minibatches); shrink dp into pp.
  int64_t rows = shape.kind == CallKind::Train
                     ? shape.batch / std::max<int64_t>(1, shape.minibatches)
                     : shape.batch;
  while (s.dp > 1 && rows % s.dp != 0) {
    s.dp /= 2;
    s.pp *= 2;
  }
  if (s.pp > arch.shape.layers) {
    s.pp = 1;
    s.dp = 1;
  }
  return s;
}

namespace {

std::string gb(double bytes) {
  // Two significant digits below 0.1 GB, so that a small model's memory
  // does not read as 0.0.
  if (bytes > 0 && bytes < 1e8) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2g", bytes / 1e9);
    return buf;
  }
  return llvm::formatv("{0:f1}", bytes / 1e9).str();
}
std::string sec(double s) {
  if (s >= 1)
    return llvm::formatv("{0:f2}s", s).str();
  return llvm::formatv("{0:f1}ms", s * 1e3).str();
}

std::string where(Location loc) {
  if (auto f = dyn_cast<FileLineColLoc>(loc)) {
    StringRef file = f.getFilename().getValue();
    return llvm::formatv("{0}:{1}", file.substr(file.find_last_of('/') + 1),
                         f.getLine())
        .str();
  }
  return "";
}

} // namespace

LogicalResult rlhfc::cost::printEstimates(ModuleOp module,
                                          const Calibration &cal,
                                          llvm::raw_ostream &os) {
  SymbolTable symbols(module);
  for (auto alg : module.getOps<r::AlgorithmOp>()) {
    auto cluster = alg.getClusterOp();
    if (!cluster)
      return alg.emitError("algorithm has no cluster");
    Hardware hw = hardwareOf(cluster, cal);
    int64_t gpus = cluster.getNumGpus();
    os << llvm::formatv("algorithm @{0} on cluster @{1}: {2} x {3} {4} "
                        "({5:f1} TFLOP/s bf16, {6} GB HBM per GPU)\n",
                        alg.getSymName(), cluster.getSymName(),
                        cluster.getNodes(), cluster.getGpusPerNode(), hw.name,
                        hw.flops / 1e12, gb(hw.hbmBytes));
    // Rows are printed once the widest call, source and placement are
    // known (sources under a long file name would shift the columns).
    struct Row {
      std::string call, source, place, rest;
      bool note = false; ///< `rest` under the call, past the first columns
    };
    std::vector<Row> rows;
    bool repeated = false; // a call marked xN (dynamic sampling)
    rows.push_back(
        {"call", "source", "placement",
         llvm::formatv("{0,9} {1,9} {2,8} {3,8} {4,8} {5,8} | "
                       "{6,8} {7,7} {8,6} {9,7} {10,7} {11,7}",
                       "time", "compute", "tp", "pp", "dp", "optim", "mem GB",
                       "weights", "grads", "optim", "act", "kv")
             .str()});
    double total = 0;
    const double usable = kUsableHbmFraction * hw.hbmBytes;
    int over = 0;
    // Each model's layout after its latest call, and its weights per GPU
    // there, for the ema rows.
    llvm::StringMap<std::pair<Strategy, double>> latest;
    for (Operation &op : alg.getBodyBlock()) {
      if (auto ema = dyn_cast<r::EmaOp>(op)) {
        auto to = latest.find(ema.getTarget());
        auto from = latest.find(ema.getSource());
        if (to == latest.end() || from == latest.end())
          continue;
        const Strategy &t = to->second.first, &f = from->second.first;
        Arch arch = archOf(symbols.lookup<r::ModelOp>(ema.getSource()));
        double move =
            sameLayout(f, t) ? 0.0 : estimateReallocFast(arch, hw, f, t).time;
        double time = move + emaUpdateTime(arch, hw, t, to->second.second);
        total += time;
        std::string name =
            ("ema @" + ema.getTarget() + " from @" + ema.getSource()).str();
        rows.push_back({name, where(op.getLoc()), "target's layout",
                        llvm::formatv("{0,9} {1,9} {2,8} {3,8} {4,8} {5,8} | "
                                      "{6,8}",
                                      sec(time), sec(time - move), "", "", "",
                                      "", gb(3 * to->second.second))
                            .str()});
        continue;
      }
      if (auto c = dyn_cast<r::ComputeOp>(op)) {
        HostEstimate h = estimateHost(c);
        total += h.time;
        std::string name =
            ("compute " + (c.getFnAttr()
                               ? c.getFnAttr().getValue()
                               : r::stringifyComputeKind(c.getKind())))
                .str() +
            timesLabel(r::expectedRounds(c), repeated);
        rows.push_back({name, where(op.getLoc()), "controller",
                        llvm::formatv("{0,9} {1,9} {2,8} {3,8} {4,8} {5,8} | "
                                      "{6,8}",
                                      sec(h.time), sec(h.time), "", "", "", "",
                                      gb(h.bytes))
                            .str()});
        continue;
      }
      if (!r::isModelCall(&op))
        continue;
      auto modelRef = op.getAttrOfType<FlatSymbolRefAttr>("model");
      auto model = symbols.lookup<r::ModelOp>(modelRef.getValue());
      Arch arch = archOf(model);
      CallShape shape = shapeOf(&op, model);
      std::optional<Strategy> st = strategyOf(&op);
      bool pinned = st.has_value();
      Strategy s = pinned ? *st : defaultStrategy(arch, hw, gpus, shape);
      Estimate e = estimateCall(arch, hw, s, shape);
      latest[modelRef.getValue()] = {s, e.memory.weights};
      total += e.time.total();
      std::string name =
          (op.getName().stripDialect() + " @" + modelRef.getValue()).str() +
          timesLabel(shape.repeats, repeated);
      std::string place = llvm::formatv(
          "[{0}:{1}] {2}x{3}x{4}{5}{6}{7}", s.firstGpu,
          s.firstGpu + s.devices(), s.dp, s.tp, s.pp,
          s.sp > 1 ? llvm::formatv(" sp{0}", s.sp).str() : std::string(),
          s.microBatches > 1 ? llvm::formatv(" mbs{0}", s.microBatches).str()
                             : std::string(),
          pinned ? "" : "*");
      rows.push_back(
          {name, where(op.getLoc()), place,
           llvm::formatv("{0,9} {1,9} {2,8} {3,8} {4,8} {5,8} | {6,8} {7,7} "
                         "{8,6} {9,7} {10,7} {11,7}",
                         sec(e.time.total()), sec(e.time.compute),
                         sec(e.time.tpComm), sec(e.time.ppComm),
                         sec(e.time.dpComm), sec(e.time.optimizer),
                         gb(e.memory.total()), gb(e.memory.weights),
                         gb(e.memory.grads), gb(e.memory.optimizer),
                         gb(e.memory.activations), gb(e.memory.kvCache))
               .str()});
      if (e.memory.total() > usable) {
        ++over;
        // Generated in waves, the same layout may fit: say in how many.
        std::string waves;
        if (shape.kind == CallKind::Generate && s.microBatches <= 1)
          if (int64_t w = fewestWaves(arch, hw, s, shape, usable); w > 1)
            waves = llvm::formatv("; in {0} waves (mbs = {0}: a KV cache per "
                                  "wave) it would",
                                  w);
        rows.push_back({"", "", "",
                        llvm::formatv("^ does not fit: {0} GB needed per GPU, "
                                      "{1} GB available{2}",
                                      gb(e.memory.total()), gb(usable), waves)
                            .str(),
                        /*note=*/true});
      }
    }
    size_t w[3] = {24, 12, 16};
    for (const Row &r : rows) {
      w[0] = std::max(w[0], r.call.size());
      w[1] = std::max(w[1], r.source.size());
      w[2] = std::max(w[2], r.place.size());
    }
    for (const Row &r : rows) {
      if (r.note) {
        os.indent(w[0] + 1) << r.rest << "\n";
        continue;
      }
      os << llvm::left_justify(r.call, w[0]) << " "
         << llvm::left_justify(r.source, w[1]) << " "
         << llvm::left_justify(r.place, w[2]) << " " << r.rest << "\n";
    }
    os << llvm::formatv(
        "sum of call times: {0} per iteration (calls run one after "
        "another; placement marked * is the default: all GPUs, "
        "dp x tp x pp, then sp and micro-batches (mbs: a generate's waves) "
        "where more than one; host functions run on the controller, their "
        "memory is the controller's)\n",
        sec(total));
    if (repeated)
      os << "calls marked xN run N times per iteration on average: "
            "@filter_groups draws further batches (expected_rounds), and "
            "their time is the rounds'\n";
    if (over)
      os << llvm::formatv(
          "{0} need{1} more memory than a GPU has available ({2} GB: 90% of "
          "its HBM, the rest kept for the CUDA context and allocator slack); "
          "the planner would not place {3} so\n",
          over == 1 ? "1 call" : llvm::formatv("{0} calls", over).str(),
          over == 1 ? "s" : "", gb(usable), over == 1 ? "it" : "them");
    os << "\n";
  }
  return success();
}
