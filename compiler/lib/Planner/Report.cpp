//===- Report.cpp - plans people can read ---------------------------------===//

#include "rlhfc/Planner/Report.h"
#include "rlhfc/Support/SourcePaths.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"

using namespace rlhfc;
using namespace rlhfc::plan;
using llvm::json::Array;
using llvm::json::Object;
namespace r = mlir::rlhf;

namespace {

Object meshJson(int64_t first, int64_t size) {
  return Object{{"first_gpu", first}, {"gpus", size}};
}

Object strategyJson(const cost::Strategy &s) {
  return Object{{"dp", s.dp},           {"tp", s.tp},
                {"pp", s.pp},           {"micro_batches", s.microBatches},
                {"zero", s.zero},       {"recompute", s.recompute},
                {"offload", s.offload}, {"sp", s.sp}};
}

/// A move of a model's weights between two layouts (rlhf.realloc,
/// rlhf.weight_update): the model, where, both layouts and the cost.
template <typename MoveOp> Object moveJson(MoveOp op) {
  auto layout = [](r::MeshAttr mesh, r::StrategyAttr st) {
    return Object{{"mesh", meshJson(mesh.getFirst(), mesh.getSize())},
                  {"dp", st.getDp()},
                  {"tp", st.getTp()},
                  {"pp", st.getPp()}};
  };
  Object o{{"model", op.getSource().str()},
           {"location", positionOf(op.getLoc())},
           {"from", layout(op.getFromMesh(), op.getFrom())},
           {"to", layout(op.getToMesh(), op.getTo())}};
  if (auto c = op.getCostAttr()) {
    o["predicted_time_s"] = c.getTime().convertToDouble();
    o["bytes_moved"] = c.getMemory().convertToDouble();
  }
  return o;
}

} // namespace

llvm::json::Value plan::planToJson(r::AlgorithmOp alg, const Problem &p,
                                   const SimResult &sim) {
  Array calls, reallocs, transfers, loads, emas;
  for (size_t c = 0; c < p.calls.size(); ++c) {
    const Call &call = p.calls[c];
    Object o{{"name", call.label}, {"location", positionOf(call.op->getLoc())}};
    // Dynamic sampling's rounds, which the predicted time includes.
    if (double rounds = r::expectedRounds(call.op); rounds != 1.0)
      o["expected_rounds"] = rounds;
    if (!call.host) {
      const Candidate &k = p.cands[c][0];
      o["model"] = p.models[call.model].name;
      o["mesh"] = meshJson(k.s.firstGpu, k.devices);
      o["strategy"] = strategyJson(k.s);
      o["pinned"] = bool(call.op->getAttr("pinned"));
      o["predicted_time_s"] = k.time;
      if (k.s.offload)
        o["host_load_s"] = k.load;
      o["memory_per_gpu_bytes"] = Object{
          {"weights", k.mem.weights},     {"gradients", k.mem.grads},
          {"optimizer", k.mem.optimizer}, {"activations", k.mem.activations},
          {"kv_cache", k.mem.kvCache},    {"total", k.mem.total()}};
    } else {
      o["runs_on"] = "controller";
      o["predicted_time_s"] = call.hostTime;
    }
    for (const Event &e : sim.events)
      if ((e.kind == Event::Call || e.kind == Event::Host) &&
          e.call == int(c) && e.iteration == 0) {
        o["start_s"] = e.start;
        o["end_s"] = e.end;
      }
    calls.push_back(std::move(o));
  }
  for (mlir::Operation &op : alg.getBodyBlock()) {
    if (auto ra = mlir::dyn_cast<r::ReallocOp>(op)) {
      reallocs.push_back(moveJson(ra));
    } else if (auto wu = mlir::dyn_cast<r::WeightUpdateOp>(op)) {
      // A copy into a generator's own layout (asynchronous plans).
      Object o = moveJson(wu);
      o["weight_update"] = true;
      o["version_lag"] = wu.getVersionLag();
      reallocs.push_back(std::move(o));
    } else if (auto ld = mlir::dyn_cast<r::OnloadOp>(op)) {
      Object o{
          {"model", ld.getModel().str()},
          {"location", positionOf(op.getLoc())},
          {"mesh", meshJson(ld.getMesh().getFirst(), ld.getMesh().getSize())}};
      if (auto c = ld.getCostAttr()) {
        o["predicted_time_s"] = c.getTime().convertToDouble();
        o["bytes"] = c.getMemory().convertToDouble();
      }
      loads.push_back(std::move(o));
    } else if (auto t = mlir::dyn_cast<r::TransferOp>(op)) {
      auto rows = [](r::MeshAttr mesh, int64_t dp) {
        return Object{{"mesh", meshJson(mesh.getFirst(), mesh.getSize())},
                      {"dp", dp}};
      };
      Object o{{"location", positionOf(op.getLoc())},
               {"from", rows(t.getFrom(), t.getFromDp())},
               {"to", rows(t.getTo(), t.getToDp())}};
      if (auto c = t.getCostAttr()) {
        o["predicted_time_s"] = c.getTime().convertToDouble();
        o["bytes"] = c.getMemory().convertToDouble();
      }
      transfers.push_back(std::move(o));
    }
  }
  for (size_t i = 0; i < p.averages.size(); ++i) {
    const Average &e = p.averages[i];
    Object o{{"target", p.models[e.target].name},
             {"source", p.models[e.source].name},
             {"location", positionOf(e.op->getLoc())}};
    // Both layouts' GPUs, one event per range, all of one span.
    for (const Event &ev : sim.events)
      if (ev.kind == Event::Average && ev.call == int(i) && ev.iteration == 0) {
        o["predicted_time_s"] = ev.end - ev.start;
        o["start_s"] = ev.start;
        o["end_s"] = ev.end;
      }
    emas.push_back(std::move(o));
  }
  Array peak;
  for (double b : sim.peakMemory)
    peak.push_back(b);
  Object report{
      {"algorithm", alg.getSymName().str()},
      {"cluster", Object{{"name", alg.getCluster().str()},
                         {"hardware", p.hw.name},
                         {"nodes", p.nodes},
                         {"gpus_per_node", p.hw.gpusPerNode},
                         {"usable_memory_per_gpu_bytes", p.memoryLimit}}},
      {"predicted_iteration_time_s", sim.iterationTime},
      {"staleness", p.staleness},
      {"calls", std::move(calls)},
      {"reallocations", std::move(reallocs)},
      {"transfers", std::move(transfers)},
      {"host_loads", std::move(loads)},
      {"emas", std::move(emas)},
      {"peak_memory_per_gpu_bytes", std::move(peak)},
  };
  // Held-out evaluation, priced by rlhf-schedule: one batch of its dataset.
  if (auto t = alg->getAttrOfType<mlir::FloatAttr>("eval_batch_time")) {
    report["eval_dataset"] = alg.getEval()->str();
    report["eval_interval"] = alg.getEvalInterval();
    report["predicted_eval_batch_time_s"] = t.getValueAsDouble();
  }
  return report;
}
