//===- LowerToRuntime.cpp - rlhf-lower-to-runtime -------------------------===//
//
// The planned rlhf module becomes a `main` plus one iteration function whose
// ops are calls into runtime/include/rlhf/runtime/rlhf_program.h. The plan
// (layouts, schedules of reallocations and transfers, predicted memory) is
// embedded as constant globals. The iteration body is straight-line code, so
// the lowering walks it once, mapping each rlhf value to a runtime handle.
//
//===----------------------------------------------------------------------===//

#include "EvalSlice.h"
#include "FilterLoop.h"
#include "PassUtils.h"
#include "RuntimeEmitter.h"
#include "rlhfc/Support/SourcePaths.h"
#include "rlhfc/Transforms/FnCode.h"
#include "rlhfc/Transforms/Passes.h"

#include "rlhf/runtime/rlhf_program.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

namespace rlhfc {
#define GEN_PASS_DEF_RLHFLOWERTORUNTIME
#include "rlhfc/Transforms/Passes.h.inc"
} // namespace rlhfc

using namespace mlir;
using namespace rlhfc;
namespace r = mlir::rlhf;

// The runtime's enums follow the dialect's order.
static_assert(int(r::ComputeKind::exact_match) == RLHF_COMPUTE_EXACT_MATCH &&
              int(r::ComputeKind::script_reward) == RLHF_COMPUTE_SCRIPT_REWARD);

using namespace rlhfc::lowering;

namespace {

/// The temperature of the generate whose sequences `values` carry (through
/// fields and transfers), 1 for a greedy one or none: a model call reading
/// them computes the log-probs of the distribution they were sampled from.
double samplingTemperature(ValueRange values) {
  for (Value v : values) {
    Operation *def = v.getDefiningOp();
    while (def && isa<r::FieldOp, r::TransferOp>(def))
      def = def->getOperand(0).getDefiningOp();
    if (auto g = dyn_cast_or_null<r::GenerateOp>(def))
      return g.getGreedy() ? 1.0 : g.getTemperature().convertToDouble();
  }
  return 1.0;
}

struct LowerToRuntime : rlhfc::impl::RLHFLowerToRuntimeBase<LowerToRuntime> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto algs = llvm::to_vector(module.getOps<r::AlgorithmOp>());
    if (algs.size() > 1) {
      // At the second run: the file's first line would point at nothing.
      InFlightDiagnostic d = algs[1].emitError();
      d << "an executable runs one algorithm, found " << algs.size()
        << "; keep one run block (--emit=mlir, plan and trace take several)";
      d.attachNote(algs[0].getLoc()) << "the first run block";
      return signalPassFailure();
    }
    if (algs.empty()) {
      module.emitError() << "an executable runs one algorithm, found none; "
                            "add a run block";
      return signalPassFailure();
    }
    if (failed(lower(algs.front())))
      return signalPassFailure();
    // The declarations are now constants of main.
    for (Operation &op :
         llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (isa<r::ClusterOp, r::ModelOp, r::DatasetOp, r::AlgorithmOp>(op))
        op.erase();
  }

  LogicalResult lower(r::AlgorithmOp alg) {
    ModuleOp module = getOperation();
    Emitter e(module);
    OpBuilder &b = e.b;
    auto cluster = alg.getClusterOp();
    if (!cluster)
      return alg.emitError("the algorithm has no cluster");
    const int64_t gpus = cluster.getNodes() * cluster.getGpusPerNode();
    // A model's placement as a layout array (its heads decide the USP
    // split of sp).
    auto layoutFor = [&](StringRef model, r::MeshAttr mesh,
                         r::StrategyAttr st) {
      int64_t heads = 1;
      if (auto m = module.lookupSymbol<r::ModelOp>(model))
        heads = m.getArch().getHeads();
      return layoutOf(mesh, st, heads, cluster.getGpusPerNode());
    };

    // Models and datasets are numbered in declaration order.
    llvm::StringMap<int64_t> modelIndex, datasetIndex;
    SmallVector<r::ModelOp> models;
    SmallVector<r::DatasetOp> datasets;
    for (auto m : module.getOps<r::ModelOp>()) {
      modelIndex[m.getSymName()] = int64_t(models.size());
      models.push_back(m);
    }
    for (auto d : module.getOps<r::DatasetOp>()) {
      datasetIndex[d.getSymName()] = int64_t(datasets.size());
      datasets.push_back(d);
    }

    // Asynchronous plans: a model with a weight update has a generator of
    // its own that runs ahead (runtime/lib/ProgramAsync.cpp). Its generate
    // samples later iterations' prompts, so they must come straight from a
    // dataset column, and one generate per model runs ahead.
    llvm::StringMap<r::WeightUpdateOp> updates;
    for (auto up : alg.getBodyBlock().getOps<r::WeightUpdateOp>()) {
      if (up.getSource() != up.getTarget())
        return up.emitError("the runtime updates a model's own generator "
                            "only; '")
               << up.getSource() << "' to '" << up.getTarget()
               << "' is not supported";
      updates.try_emplace(up.getSource(), up);
    }
    llvm::StringMap<r::GenerateOp> aheadOf;
    for (auto g : alg.getBodyBlock().getOps<r::GenerateOp>()) {
      if (!updates.count(g.getModel()))
        continue;
      auto field = g.getPrompt().getDefiningOp<r::FieldOp>();
      if (!field || !field.getRecord().getDefiningOp<r::LoadOp>())
        return g.emitError()
               << "a generate that runs ahead (staleness " << g.getStaleness()
               << ") samples later iterations' prompts, so they must be a "
                  "dataset column; pass the dataset's field, or compute "
                  "with staleness = 0";
      if (auto [it, fresh] = aheadOf.try_emplace(g.getModel(), g); !fresh) {
        InFlightDiagnostic d =
            g.emitError()
            << "@" << g.getModel()
            << " has one generator that runs ahead, but this is its second "
               "generate in the iteration; generate once and reuse the "
               "samples, or compute with staleness = 0";
        d.attachNote(it->second.getLoc()) << "its first generate";
        return d;
      }
    }
    for (auto &[model, up] : updates)
      if (!aheadOf.count(model))
        return up.emitError() << "the plan updates a generator of @" << model
                              << ", but no generate of it runs ahead";

    // A model's layout when an iteration starts.
    for (Operation &op : alg.getBodyBlock())
      if (r::isModelCall(&op) && !isPlaced(&op) &&
          !(isa<r::GenerateOp>(op) &&
            aheadOf.count(
                op.getAttrOfType<FlatSymbolRefAttr>("model").getValue())))
        return op.emitError(
            "call is not placed; run the planning pipeline before "
            "rlhf-lower-to-runtime");
    llvm::StringMap<SmallVector<int64_t>> initial;
    for (const auto &kv : initialPlacements(alg))
      initial[kv.getKey()] =
          layoutFor(kv.getKey(), kv.getValue().mesh, kv.getValue().strategy);

    // Predicted per-GPU peak memory, printed beside measured RSS at the end.
    auto sim = simulatePlaced(alg, cost::Calibration{}, /*record=*/false);
    if (failed(sim))
      return failure();
    SmallVector<double> peak(sim->second.peakMemory.begin(),
                             sim->second.peakMemory.end());
    peak.resize(size_t(gpus), 0.0);
    double iteration = 0;
    if (auto t = alg->getAttrOfType<FloatAttr>("iteration_time"))
      iteration = t.getValueAsDouble();
    else
      iteration = sim->second.iterationTime;

    Location loc = alg.getLoc();
    std::string iterName = ("__rlhf_iteration_" + alg.getSymName()).str();

    // main(argc, argv)
    b.setInsertionPointToEnd(module.getBody());
    auto mainFn = b.create<func::FuncOp>(
        loc, "main", b.getFunctionType({e.i32, e.ptr}, {e.i32}));
    Block *entry = mainFn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value prog = e.call(
        loc, RLHF_PROG_CREATE_SYMBOL, e.ptr,
        {entry->getArgument(0), entry->getArgument(1),
         e.string(loc, alg.getSymName()), e.int64(loc, alg.getSteps()),
         e.int64(loc, alg.getSeed()), e.int64(loc, alg.getSaveInterval()),
         e.int64(loc, gpus), e.float64(loc, iteration)});
    emitDeclarations(e, alg, prog, models, datasets, initial);
    e.call(loc, "rlhf_prog_set_hardware", e.voidTy,
           {prog, e.string(loc, cluster.getHardware().getName())});
    for (auto [gpu, bytes] : llvm::enumerate(peak))
      if (bytes > 0) // unset GPUs predict nothing: a big cluster stays small
        e.call(loc, "rlhf_prog_set_predicted_memory", e.voidTy,
               {prog, e.int64(loc, int64_t(gpu)), e.float64(loc, bytes)});
    // rlhf_onload / rlhf_offload of an rlhf.onload / rlhf.offload's model in
    // its call's layout.
    auto hostMove = [&](auto op, StringRef fn, StringRef what, Value prog) {
      Location l = op.getLoc();
      e.call(l, fn, e.voidTy,
             {prog, e.int64(l, modelIndex.lookup(op.getModel())),
              e.array(l, (op.getModel() + "_" + what).str(),
                      ArrayRef<int64_t>(layoutFor(op.getModel(), op.getMesh(),
                                                  op.getStrategy())))});
    };
    // Held-out evaluation: the runtime calls the eval function (filled in
    // below) over the eval dataset's batches when an evaluation is due.
    LLVM::LLVMFuncOp evalFn;
    std::optional<EvalSlice> es;
    double evalBatch = 0; // the plan's seconds per eval batch
    if (alg.getEval()) {
      FailureOr<EvalSlice> slice = evalSlice(alg);
      if (failed(slice))
        return failure();
      es = std::move(*slice);
      if (auto t = alg->getAttrOfType<FloatAttr>("eval_batch_time")) {
        evalBatch = t.getValueAsDouble();
      } else {
        FailureOr<double> priced = evalBatchTime(alg, *es, {});
        if (failed(priced))
          return failure();
        evalBatch = *priced;
      }
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToEnd(module.getBody());
      evalFn = b.create<LLVM::LLVMFuncOp>(
          loc, ("__rlhf_eval_" + alg.getSymName()).str(),
          LLVM::LLVMFunctionType::get(e.voidTy, {e.ptr, e.i64}),
          LLVM::Linkage::Internal);
    }
    if (evalFn)
      e.call(loc, "rlhf_prog_set_eval", e.voidTy,
             {prog, e.int64(loc, datasetIndex.lookup(*alg.getEval())),
              e.int64(loc, alg.getEvalInterval()),
              e.int64(loc, alg.getEvalSamples()), e.float64(loc, evalBatch),
              b.create<LLVM::AddressOfOp>(loc, evalFn)});
    Value first = e.call(loc, "rlhf_prog_start", e.i64, {prog});
    // Offloaded models rest in host memory from the start.
    for (auto off : alg.getBodyBlock().getOps<r::OffloadOp>())
      hostMove(off, "rlhf_offload", "offload", prog);
    Value last = e.call(loc, "rlhf_prog_steps", e.i64, {prog});
    Value one = b.create<arith::ConstantIntOp>(loc, 1, 64);
    auto loop = b.create<scf::ForOp>(loc, first, last, one);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(loop.getBody());
      Value step = loop.getInductionVar();
      e.call(loc, "rlhf_step_begin", e.voidTy, {prog, step});
      b.create<func::CallOp>(loc, iterName, TypeRange{},
                             ValueRange{prog, step});
      e.call(loc, "rlhf_step_end", e.voidTy, {prog, step});
    }
    Value rc = e.call(loc, "rlhf_prog_finish", e.i32, {prog});
    b.create<func::ReturnOp>(loc, rc);

    // The iteration.
    b.setInsertionPointToEnd(module.getBody());
    auto iterFn = b.create<func::FuncOp>(loc, iterName,
                                         b.getFunctionType({e.ptr, e.i64}, {}));
    iterFn.setPrivate();
    Block *body = iterFn.addEntryBlock();
    b.setInsertionPointToStart(body);
    Value p = body->getArgument(0), stepArg = body->getArgument(1);
    DenseMap<Value, Value> handle;
    auto layoutConst = [&](Location l, StringRef what, StringRef model,
                           r::MeshAttr mesh, r::StrategyAttr st) {
      return e.array(l, what, ArrayRef<int64_t>(layoutFor(model, mesh, st)));
    };
    auto inputs = [&](Location l, ValueRange vals) {
      Value n = e.int64(l, int64_t(vals.size()));
      Value arr = b.create<LLVM::AllocaOp>(l, e.ptr, e.ptr, n);
      for (auto [i, v] : llvm::enumerate(vals)) {
        Value slot = b.create<LLVM::GEPOp>(l, e.ptr, e.ptr, arr,
                                           ArrayRef<LLVM::GEPArg>{int32_t(i)});
        b.create<LLVM::StoreOp>(l, handle.lookup(v), slot);
      }
      return std::make_pair(n, arr);
    };
    // Dynamic sampling: the ops a filter depends on run in a loop.
    FailureOr<FilterLoop> fl = filterLoop(alg);
    if (failed(fl))
      return failure();
    Block *loopBlock = nullptr;
    // In the eval function: loads read the eval dataset's batch `stepArg`,
    // and generation samples once per prompt, greedily.
    bool evalMode = false;
    // One greedy sample per prompt, or eval_samples drawn as `g` draws.
    const int64_t evalSamples = alg.getEvalSamples();
    auto evalGenerate = [&](r::GenerateOp g, Value layout) {
      Location l = g.getLoc();
      const bool greedy = evalSamples == 1;
      return e.call(
          l, "rlhf_generate", e.ptr,
          {p, e.int64(l, modelIndex.lookup(g.getModel())),
           handle.lookup(g.getPrompt()), layout,
           e.int64(l, g.getMaxNewTokens()), e.int64(l, evalSamples),
           e.float64(l, greedy ? 1.0 : g.getTemperature().convertToDouble()),
           e.float64(l, greedy ? 1.0 : g.getTopP().convertToDouble()),
           e.int64(l, greedy ? 1 : int64_t(g.getGreedy())),
           e.string(l, ("eval generate " + g.getModel()).str())});
    };
    // Undoes model moves, last first.
    auto undoMoves = [&](Location l, ArrayRef<Operation *> moves) {
      for (Operation *move : llvm::reverse(moves)) {
        if (auto re = dyn_cast<r::ReallocOp>(move))
          e.call(l, "rlhf_realloc", e.voidTy,
                 {p, e.int64(l, modelIndex.lookup(re.getSource())),
                  layoutConst(l, (re.getSource() + "_realloc_to").str(),
                              re.getSource(), re.getToMesh(), re.getTo()),
                  layoutConst(l, (re.getSource() + "_realloc_from").str(),
                              re.getSource(), re.getFromMesh(), re.getFrom())});
        else if (auto on = dyn_cast<r::OnloadOp>(move))
          hostMove(on, "rlhf_offload", "offload", p);
        else if (auto off = dyn_cast<r::OffloadOp>(move))
          hostMove(off, "rlhf_onload", "onload", p);
      }
    };
    auto emitOp = [&](Operation &op) -> LogicalResult {
      Location l = op.getLoc();
      auto modelIdx = [&](StringRef name) {
        return e.int64(l, modelIndex.lookup(name));
      };
      auto placed = [&](StringRef what) {
        auto model = op.getAttrOfType<FlatSymbolRefAttr>("model").getValue();
        return layoutConst(l, (model + "_" + what).str(), model,
                           op.getAttrOfType<r::MeshAttr>("mesh"),
                           op.getAttrOfType<r::StrategyAttr>("strategy"));
      };
      if (auto ld = dyn_cast<r::LoadOp>(op)) {
        // The rows drawn: a batch, or a round's gen_batch under a filter.
        auto fields = ld.getBatch().getType().getTypes();
        if (evalMode) {
          handle[ld.getResult()] = e.call(
              l, "rlhf_eval_load", e.ptr,
              {p, e.int64(l, datasetIndex.lookup(*alg.getEval())), stepArg});
          return success();
        }
        handle[ld.getResult()] = e.call(
            l, "rlhf_load", e.ptr,
            {p, e.int64(l, datasetIndex.lookup(ld.getDataset())), stepArg,
             e.int64(l, fields.empty() ? 0 : fields.front().getDimSize(0))});
      } else if (auto f = dyn_cast<r::FieldOp>(op)) {
        handle[f.getResult()] =
            e.call(l, "rlhf_field", e.ptr,
                   {p, handle.lookup(f.getRecord()), e.string(l, f.getName())});
      } else if (auto re = dyn_cast<r::ReallocOp>(op)) {
        if (re.getSource() != re.getTarget())
          return re.emitError(
                     "the runtime reallocates a model onto itself only; '")
                 << re.getSource() << "' to '" << re.getTarget()
                 << "' is not supported";
        e.call(l, "rlhf_realloc", e.voidTy,
               {p, modelIdx(re.getSource()),
                layoutConst(l, (re.getSource() + "_realloc_from").str(),
                            re.getSource(), re.getFromMesh(), re.getFrom()),
                layoutConst(l, (re.getSource() + "_realloc_to").str(),
                            re.getSource(), re.getToMesh(), re.getTo())});
      } else if (auto on = dyn_cast<r::OnloadOp>(op)) {
        hostMove(on, "rlhf_onload", "onload", p);
      } else if (auto off = dyn_cast<r::OffloadOp>(op)) {
        hostMove(off, "rlhf_offload", "offload", p);
      } else if (auto t = dyn_cast<r::TransferOp>(op)) {
        // The consumer's layout decides which ranks receive which rows.
        r::StrategyAttr st;
        StringRef consumer;
        for (Operation *user : t.getResult().getUsers())
          if (auto s = user->getAttrOfType<r::StrategyAttr>("strategy");
              s && !st) {
            st = s;
            if (auto m = user->getAttrOfType<FlatSymbolRefAttr>("model"))
              consumer = m.getValue();
          }
        if (!st)
          return t.emitError("transfer has no placed consumer");
        handle[t.getResult()] =
            e.call(l, "rlhf_transfer", e.ptr,
                   {p, handle.lookup(t.getInput()),
                    layoutConst(l, "transfer_to", consumer, t.getTo(), st)});
      } else if (auto g = dyn_cast<r::GenerateOp>(op); g && evalMode) {
        // A generator that runs ahead samples with older weights: evaluate
        // the trainer's, where the iteration starts with them.
        handle[g.getResult()] =
            aheadOf.count(g.getModel())
                ? evalGenerate(
                      g, e.array(l, (g.getModel() + "_eval").str(),
                                 ArrayRef<int64_t>(initial[g.getModel()])))
                : evalGenerate(g, placed("generate"));
      } else if (auto g = dyn_cast<r::GenerateOp>(op);
                 g && aheadOf.count(g.getModel())) {
        auto field = g.getPrompt().getDefiningOp<r::FieldOp>();
        auto load = field.getRecord().getDefiningOp<r::LoadOp>();
        handle[g.getResult()] =
            e.call(l, "rlhf_generate_stale", e.ptr,
                   {p, modelIdx(g.getModel()),
                    e.int64(l, datasetIndex.lookup(load.getDataset())),
                    e.string(l, field.getName()), stepArg, placed("generate"),
                    e.int64(l, g.getMaxNewTokens()), e.int64(l, g.getN()),
                    e.float64(l, g.getTemperature().convertToDouble()),
                    e.float64(l, g.getTopP().convertToDouble()),
                    e.int64(l, g.getGreedy()), e.int64(l, g.getStaleness()),
                    e.string(l, ("generate " + g.getModel()).str())});
      } else if (auto up = dyn_cast<r::WeightUpdateOp>(op)) {
        e.call(l, "rlhf_weight_update", e.voidTy,
               {p, modelIdx(up.getSource()),
                layoutConst(l, (up.getSource() + "_update_from").str(),
                            up.getSource(), up.getFromMesh(), up.getFrom()),
                layoutConst(l, (up.getSource() + "_update_to").str(),
                            up.getSource(), up.getToMesh(), up.getTo()),
                e.int64(l, up.getVersionLag())});
      } else if (auto g = dyn_cast<r::GenerateOp>(op)) {
        handle[g.getResult()] =
            e.call(l, "rlhf_generate", e.ptr,
                   {p, modelIdx(g.getModel()), handle.lookup(g.getPrompt()),
                    placed("generate"), e.int64(l, g.getMaxNewTokens()),
                    e.int64(l, g.getN()),
                    e.float64(l, g.getTemperature().convertToDouble()),
                    e.float64(l, g.getTopP().convertToDouble()),
                    e.int64(l, g.getGreedy()),
                    e.string(l, ("generate " + g.getModel()).str())});
      } else if (auto in = dyn_cast<r::InferenceOp>(op)) {
        handle[in.getResult()] =
            e.call(l, "rlhf_inference", e.ptr,
                   {p, modelIdx(in.getModel()), handle.lookup(in.getSeq()),
                    placed("inference"),
                    e.float64(l, evalMode && evalSamples == 1
                                     ? 1.0
                                     : samplingTemperature(in.getSeq())),
                    e.string(l, ("inference " + in.getModel()).str())});
      } else if (auto ts = dyn_cast<r::TrainStepOp>(op)) {
        auto [n, arr] = inputs(l, ts.getInputs());
        std::string settings = settingsString(ts.getSettings());
        auto st = ts->getAttrOfType<r::StrategyAttr>("strategy");
        for (auto [on, key] : {std::pair(st.getRecompute(), "recompute=1"),
                               std::pair(st.getZero(), "zero=1")})
          if (on)
            settings += (settings.empty() ? "" : ",") + std::string(key);
        if (double t = samplingTemperature(ts.getInputs()); t != 1.0)
          settings +=
              (settings.empty() ? "" : ",") + numberSetting("temperature", t);
        FailureOr<std::string> code = encodeFnCode(ts);
        if (failed(code))
          return failure();
        if (evalMode) { // its loss on the batch, forward only
          e.call(l, "rlhf_eval_loss", e.voidTy,
                 {p, modelIdx(ts.getModel()), e.string(l, *code), n, arr,
                  placed("train"), e.int64(l, ts.getMinibatches()),
                  e.string(l, settings),
                  e.string(l, ("eval loss " + ts.getModel()).str())});
          return success();
        }
        handle[ts.getStats()] =
            e.call(l, "rlhf_train", e.ptr,
                   {p, modelIdx(ts.getModel()), e.string(l, *code), n, arr,
                    placed("train"), e.int64(l, ts.getMinibatches()),
                    e.int64(l, ts.getEpochs()), e.string(l, settings),
                    e.string(l, ("train " + ts.getModel()).str())});
      } else if (auto c = dyn_cast<r::ComputeOp>(op)) {
        auto [n, arr] = inputs(l, c.getInputs());
        if (c.getKind() == r::ComputeKind::fn) {
          FailureOr<std::string> code = encodeFnCode(c);
          if (failed(code))
            return failure();
          handle[c.getResult()] =
              e.call(l, "rlhf_apply", e.ptr,
                     {p, e.string(l, *code), n, arr,
                      e.string(l, c.getFnAttr().getValue())});
          return success();
        }
        std::string settings = settingsString(c.getSettings());
        if (c.getKind() == r::ComputeKind::script_reward) {
          // The command runs in the folder of the .rlhf file that calls it,
          // so relative paths in it resolve like a dataset's path.
          if (!c.getSettings().getAs<StringAttr>("command"))
            return c.emitError("script_reward has no 'command' setting");
          if (!fileOf(l).empty())
            settings += ",cwd=" + quoted(resolveFrom(l, "."));
        }
        // Its errors at run time name the call's line.
        if (std::string at = positionOf(l); !at.empty())
          settings +=
              std::string(settings.empty() ? "" : ",") + "at=" + quoted(at);
        handle[c.getResult()] = e.call(
            l, "rlhf_compute", e.ptr,
            {p, e.int64(l, int64_t(c.getKind())), n, arr, e.string(l, settings),
             e.string(l, r::stringifyComputeKind(c.getKind()))});
      } else if (auto em = dyn_cast<r::EmaOp>(op)) {
        e.call(l, "rlhf_ema", e.voidTy,
               {p, modelIdx(em.getTarget()), modelIdx(em.getSource()),
                e.float64(l, em.getDecay().convertToDouble())});
      } else if (auto f = dyn_cast<r::FilterGroupsOp>(op)) {
        // The round's values join the kept rows; a batch short of varied
        // groups sends the loop round again, after undoing the model moves
        // made in it.
        auto [n, arr] = inputs(l, f.getValues());
        Value done =
            e.call(l, "rlhf_filter_round", e.i64,
                   {p, handle.lookup(f.getMetric()), n, arr,
                    e.int64(l, int64_t(f.getGroup())),
                    e.int64(l, int64_t(f.getMaxRounds())),
                    e.float64(l, f.getMinStd().convertToDouble()),
                    e.float64(l, f.getExpectedRounds().convertToDouble()),
                    e.int64(l, datasetIndex.lookup(fl->dataset))});
        Value zero = b.create<arith::ConstantIntOp>(l, 0, 64);
        Value isDone =
            b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, done, zero);
        Region &fnBody = *b.getInsertionBlock()->getParent();
        Block *again = new Block(), *exit = new Block();
        fnBody.push_back(again);
        fnBody.push_back(exit);
        b.create<cf::CondBranchOp>(l, isDone, exit, again);
        b.setInsertionPointToStart(again);
        undoMoves(l, fl->moves);
        b.create<cf::BranchOp>(l, loopBlock);
        b.setInsertionPointToStart(exit);
        for (auto [i, kept] : llvm::enumerate(f.getKept()))
          handle[kept] =
              e.call(l, "rlhf_filter_take", e.ptr, {p, e.int64(l, int64_t(i))});
      } else {
        return op.emitError("rlhf-lower-to-runtime cannot lower this op");
      }
      return success();
    };
    for (Operation *op : fl->order) {
      if (op == fl->loopStart) {
        Region &fnBody = *b.getInsertionBlock()->getParent();
        loopBlock = new Block();
        fnBody.push_back(loopBlock);
        b.create<cf::BranchOp>(op->getLoc(), loopBlock);
        b.setInsertionPointToStart(loopBlock);
      }
      if (failed(emitOp(*op)))
        return failure();
    }
    b.create<func::ReturnOp>(loc);
    if (!evalFn)
      return success();

    // The eval function: batch `stepArg` of the eval dataset through the
    // ops that score samples, each score reported, the moves undone.
    Block *evalBody = evalFn.addEntryBlock(b);
    b.setInsertionPointToStart(evalBody);
    p = evalBody->getArgument(0);
    stepArg = evalBody->getArgument(1);
    evalMode = true;
    handle.clear();
    for (Operation *op : es->order) {
      if (failed(emitOp(*op)))
        return failure();
      for (const EvalScore &s : es->scores)
        if (s.op == op && !s.isLoss()) {
          Location l = op->getLoc();
          Value score = e.call(
              l, "rlhf_field", e.ptr,
              {p, handle.lookup(op->getResult(0)), e.string(l, s.field)});
          e.call(l, "rlhf_eval_score", e.voidTy,
                 {p, score, e.string(l, s.label)});
        }
    }
    undoMoves(loc, es->moves);
    b.create<LLVM::ReturnOp>(loc, ValueRange{});
    return success();
  }
};

} // namespace
