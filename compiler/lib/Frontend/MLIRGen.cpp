//===- MLIRGen.cpp - checked program to the rlhf dialect ------------------===//

#include "rlhfc/Frontend/MLIRGen.h"
#include "MLIRGenFn.h"
#include "rlhfc/Frontend/Builtins.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "rlhf/IR/RLHFOps.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

#include <map>

using namespace rlhfc;
using namespace mlir;
namespace r = mlir::rlhf;

namespace {

class Gen {
public:
  Gen(MLIRContext &ctx) : ctx(ctx), b(&ctx) {}

  OwningOpRef<ModuleOp> run(const sema::Program &p) {
    Location loc = UnknownLoc::get(&ctx);
    if (!p.modules.empty())
      loc = FileLineColLoc::get(&ctx, p.modules.front()->filename, 1, 1);
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    b.setInsertionPointToEnd(module->getBody());
    for (auto &[name, c] : p.clusters)
      cluster(c);
    for (auto &[name, m] : p.models)
      model(m);
    for (auto &[name, d] : p.datasets)
      dataset(d);
    llvm::StringSet<> used;
    for (const sema::Instance &in : p.instances) {
      std::string name = in.algorithm;
      for (int i = 1; used.count(name); ++i)
        name = in.algorithm + "_" + std::to_string(i);
      used.insert(name);
      algorithm(in, name);
    }
    if (failed(verify(*module)))
      return nullptr;
    return module;
  }

private:
  FloatAttr f64(double v) { return b.getF64FloatAttr(v); }
  IntegerAttr i64(int64_t v) { return b.getI64IntegerAttr(v); }
  FlatSymbolRefAttr sym(StringRef name) {
    return FlatSymbolRefAttr::get(&ctx, name);
  }
  UnitAttr flag(bool on) { return on ? b.getUnitAttr() : nullptr; }

  RankedTensorType tensorType(const rlhfc::TensorType &t) {
    Type elt = t.dtype == DType::F32
                   ? Type(b.getF32Type())
                   : Type(b.getIntegerType(t.dtype == DType::I8 ? 8 : 32));
    r::TensorKind kind = *r::symbolizeTensorKind(tensorKindName(t.kind));
    return r::getKindedTensorType(&ctx, t.shape, elt, kind);
  }

  r::RecordType recordType(const rlhfc::RecordType &rec) {
    SmallVector<StringAttr> names;
    SmallVector<RankedTensorType> types;
    for (const Field &f : rec.fields) {
      names.push_back(b.getStringAttr(f.name));
      types.push_back(tensorType(f.type));
    }
    return r::RecordType::get(&ctx, names, types);
  }

  void cluster(const sema::Cluster &c) {
    const sema::Hardware &h = *c.hardware;
    auto hw = r::HardwareAttr::get(
        &ctx, h.name, APFloat(h.bf16Flops), APFloat(h.hbmBytes),
        APFloat(h.hbmBandwidth), APFloat(h.nvlinkBandwidth),
        APFloat(h.networkBandwidth), APFloat(h.hostBandwidth));
    b.create<r::ClusterOp>(c.loc, c.name, c.nodes, c.gpusPerNode, hw);
  }

  void model(const sema::Model &m) {
    const sema::Arch &a = m.arch;
    auto arch = r::ArchAttr::get(
        &ctx, a.name, a.layers, a.hidden, a.heads, a.kvHeads, a.ffn, a.vocab,
        a.maxSeq, a.tieEmbeddings, a.qkvBias, APFloat(a.ropeTheta),
        APFloat(a.normEps), APFloat(a.rope.factor),
        APFloat(a.rope.lowFreqFactor), APFloat(a.rope.highFreqFactor),
        a.rope.originalMaxPositions);
    r::OptimizerAttr opt;
    if (m.trainable) {
      const sema::Optimizer &o = m.optimizer;
      opt = r::OptimizerAttr::get(
          &ctx, o.kind, APFloat(o.lr), APFloat(o.beta1), APFloat(o.beta2),
          APFloat(o.eps), APFloat(o.weightDecay), APFloat(o.gradClip),
          o.schedule, o.warmupSteps, o.decaySteps, APFloat(o.minLr));
    }
    auto head = r::HeadAttr::get(
        &ctx, m.head == sema::Head::Value ? r::Head::value : r::Head::lm);
    b.create<r::ModelOp>(
        m.loc, b.getStringAttr(m.name), arch, head, flag(m.trainable), opt,
        m.checkpoint.empty() ? StringAttr() : b.getStringAttr(m.checkpoint),
        m.tokenizer.empty() ? StringAttr() : b.getStringAttr(m.tokenizer));
  }

  void dataset(const sema::Dataset &d) {
    b.create<r::DatasetOp>(
        d.loc, b.getStringAttr(d.name), b.getStringAttr(d.path),
        TypeAttr::get(recordType(d.type)),
        d.promptTemplate ? b.getStringAttr(*d.promptTemplate) : StringAttr());
  }

  /// The tensor for input `in`, reusing one rlhf.field per (producer, field).
  Value input(const sema::Node::Input &in, Location loc) {
    auto key = std::make_pair(in.producer, in.field);
    if (auto it = fields.find(key); it != fields.end())
      return it->second;
    Value rec = in.producer < 0 ? batch : results.at(in.producer);
    Value v = b.create<r::FieldOp>(loc, tensorType(in.type), rec, in.field);
    fields[key] = v;
    return v;
  }

  DictionaryAttr settings(const sema::Node &n) {
    SmallVector<NamedAttribute> attrs;
    for (auto &[k, v] : n.attrs)
      attrs.push_back(b.getNamedAttr(k, f64(v)));
    for (auto &[k, v] : n.textAttrs) // script_reward's command
      attrs.push_back(b.getNamedAttr(k, b.getStringAttr(v)));
    return b.getDictionaryAttr(attrs);
  }

  template <typename CallOp> void place(CallOp op, const sema::Node &n) {
    if (!n.placement)
      return;
    const sema::Placement &pl = *n.placement;
    op.setMeshAttr(r::MeshAttr::get(&ctx, pl.firstGpu, pl.numGpus));
    op.setStrategyAttr(r::StrategyAttr::get(&ctx, pl.dp, pl.tp, pl.pp,
                                            pl.microBatches, pl.zero,
                                            pl.recompute, pl.offload, pl.sp));
    op.setPinnedAttr(b.getUnitAttr());
  }

  void algorithm(const sema::Instance &in, StringRef name) {
    auto alg = b.create<r::AlgorithmOp>(
        in.loc, b.getStringAttr(name), sym(in.cluster->name),
        i64(in.settings.steps), i64(in.settings.seed),
        i64(in.settings.saveInterval), i64(in.settings.staleness),
        in.settings.evalDataset ? sym(in.settings.evalDataset->name)
                                : FlatSymbolRefAttr(),
        i64(in.settings.evalInterval), i64(in.settings.evalSamples));
    // The models this iteration trains: their generations may lag.
    llvm::SmallPtrSet<const sema::Model *, 4> trained;
    for (const sema::Node &n : in.nodes)
      if (n.kind == sema::Node::Kind::Train)
        trained.insert(n.model);
    Block *body = new Block();
    alg.getBody().push_back(body);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(body);
    fields.clear();
    results.assign(in.nodes.size(), Value());
    // Under dynamic sampling with gen_batch, a round draws that many rows.
    r::RecordType batchType = recordType(in.dataset->type);
    if (int64_t rows = drawnRows(in))
      batchType = r::keptRowsType(batchType, in.dataset->batch, rows);
    batch = b.create<r::LoadOp>(in.loc, batchType, sym(in.dataset->name));
    for (size_t i = 0; i < in.nodes.size(); ++i) {
      const sema::Node &n = in.nodes[i];
      Location loc = n.loc;
      switch (n.kind) {
      case sema::Node::Kind::Generate: {
        auto op = b.create<r::GenerateOp>(
            loc, recordType(n.result), sym(n.model->name),
            input(n.inputs[0], loc), i64(int64_t(n.attr("max_new_tokens", 1))),
            i64(int64_t(n.attr("n", 1))), f64(n.attr("temperature", 1.0)),
            f64(n.attr("top_p", 1.0)), flag(n.attr("greedy", 0) != 0),
            i64(trained.contains(n.model) ? in.settings.staleness : 0), nullptr,
            nullptr, nullptr, nullptr);
        place(op, n);
        results[i] = op.getResult();
        break;
      }
      case sema::Node::Kind::Inference: {
        auto op = b.create<r::InferenceOp>(
            loc, recordType(n.result), sym(n.model->name),
            input(n.inputs[0], loc), nullptr, nullptr, nullptr, nullptr);
        place(op, n);
        results[i] = op.getResult();
        break;
      }
      case sema::Node::Kind::Host: {
        if (n.fn && n.fn->loss)
          break; // folded into the train step that consumes it
        SmallVector<Value> ins;
        for (const auto &inp : n.inputs)
          ins.push_back(input(inp, loc));
        auto kind =
            n.fn ? r::ComputeKind::fn : *r::symbolizeComputeKind(n.builtin);
        auto op = b.create<r::ComputeOp>(
            loc, recordType(n.result), r::ComputeKindAttr::get(&ctx, kind),
            n.fn ? b.getStringAttr(n.fn->name) : StringAttr(), ins,
            settings(n));
        if (n.fn)
          buildFnRegion(b, op.getBody(), *n.fn, ValueRange(ins).getTypes());
        results[i] = op.getResult();
        break;
      }
      case sema::Node::Kind::Train: {
        const sema::Node &lossNode = in.nodes[n.inputs[0].producer];
        const sema::FnBody &fn = *lossNode.fn;
        SmallVector<Value> ins;
        for (const auto &inp : lossNode.inputs)
          ins.push_back(input(inp, loc));
        // The loss's settings, and the call's own that the runtime reads.
        NamedAttrList trainSettings(settings(lossNode));
        if (double frozen = n.attr("frozen_steps", 0); frozen > 0)
          trainSettings.set("frozen_steps", f64(frozen));
        auto op = b.create<r::TrainStepOp>(
            loc, recordType(n.result), sym(n.model->name),
            b.getStringAttr(fn.name), ins,
            i64(int64_t(n.attr("minibatches", 1))),
            i64(int64_t(n.attr("epochs", 1))),
            trainSettings.getDictionary(&ctx), nullptr, nullptr, nullptr,
            nullptr);
        buildFnRegion(b, op.getBody(), fn, ValueRange(ins).getTypes());
        place(op, n);
        results[i] = op.getResult();
        break;
      }
      case sema::Node::Kind::Ema:
        b.create<r::EmaOp>(loc, sym(n.model->name), sym(n.source->name),
                           f64(n.attr("decay", 0.99)));
        break;
      }
      if (in.filter && in.filter->node == int(i))
        filterGroups(in, *in.filter);
    }
  }

  /// The rows a filter's round draws where they are not a batch, else 0.
  static int64_t drawnRows(const sema::Instance &in) {
    return in.filter && in.filter->genBatch > 0 &&
                   in.filter->genBatch != in.dataset->batch
               ? in.filter->genBatch
               : 0;
  }

  /// rlhf.filter_groups after the scored statement: the batch and every
  /// value a later statement reads pass through it, and later statements
  /// read its results (their kept rows).
  void filterGroups(const sema::Instance &in, const sema::FilterGroups &f) {
    Location loc = f.loc;
    sema::Node::Input scored;
    scored.producer = f.node;
    scored.field = f.field;
    scored.type = in.nodes[size_t(f.node)].result.find(f.field)->type;
    Value metric = input(scored, loc);
    SmallVector<int> passed;
    for (size_t j = size_t(f.node) + 1; j < in.nodes.size(); ++j)
      for (const sema::Node::Input &inp : in.nodes[j].inputs)
        if (inp.producer >= 0 && inp.producer <= f.node &&
            results[size_t(inp.producer)] &&
            !llvm::is_contained(passed, inp.producer))
          passed.push_back(inp.producer);
    SmallVector<Value> values = {batch};
    for (int i : passed)
      values.push_back(results[size_t(i)]);
    auto op = b.create<r::FilterGroupsOp>(
        loc, metric, values, i64(f.group),
        drawnRows(in) ? i64(in.dataset->batch) : IntegerAttr(),
        i64(f.maxRounds), f64(f.minStd), f64(f.expectedRounds));
    batch = op.getKept()[0];
    for (auto [k, i] : llvm::enumerate(passed))
      results[size_t(i)] = op.getKept()[k + 1];
    fields.clear(); // later reads take fields of the kept rows
  }

  MLIRContext &ctx;
  OpBuilder b;
  Value batch;
  std::vector<Value> results;
  std::map<std::pair<int, std::string>, Value> fields;
};

} // namespace

OwningOpRef<ModuleOp> rlhfc::mlirGen(const sema::Program &program,
                                     MLIRContext &ctx) {
  ctx.getOrLoadDialect<r::RLHFDialect>();
  return Gen(ctx).run(program);
}
