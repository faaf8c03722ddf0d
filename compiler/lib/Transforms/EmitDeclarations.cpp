//===- EmitDeclarations.cpp - a program's models and datasets -------------===//
//
// rlhf-lower-to-runtime's main starts by handing the runtime the module's
// declarations as constants: each model's shape, optimizer, checkpoint,
// numerics, schedule and layout at an iteration's start, each dataset's
// path and shapes, and the tokenizer.
//
//===----------------------------------------------------------------------===//

#include "RuntimeEmitter.h"
#include "rlhfc/Support/SourcePaths.h"

using namespace mlir;
using namespace rlhfc;
using namespace rlhfc::lowering;

void rlhfc::lowering::emitDeclarations(
    Emitter &e, r::AlgorithmOp alg, Value prog, ArrayRef<r::ModelOp> models,
    ArrayRef<r::DatasetOp> datasets,
    const llvm::StringMap<SmallVector<int64_t>> &initial) {
  for (r::ModelOp m : models) {
    Location mloc = m.getLoc();
    r::ArchAttr a = m.getArch();
    Value arch =
        e.array(mloc, (m.getSymName() + "_arch").str(),
                ArrayRef<int64_t>{a.getLayers(), a.getHidden(), a.getHeads(),
                                  a.getKvHeads(), a.getFfn(), a.getVocab(),
                                  a.getMaxSeq(), m.getHead() == r::Head::value,
                                  a.getTieEmbeddings(), a.getQkvBias()});
    // Adam settings; lr 0 marks a frozen model.
    SmallVector<double> adam = {0.0, 0.9, 0.95, 1e-8, 0.0, 1.0};
    if (m.getTrainable()) {
      adam[0] = 1e-5;
      if (auto o = m.getOptimizerAttr())
        adam = {o.getLr().convertToDouble(),
                o.getBeta1().convertToDouble(),
                o.getBeta2().convertToDouble(),
                o.getEps().convertToDouble(),
                o.getWeightDecay().convertToDouble(),
                o.getGradClip().convertToDouble()};
    }
    // Relative to the file that declares the model, as a dataset's path.
    Value ckpt = m.getCheckpoint()
                     ? e.string(mloc, resolveFrom(mloc, *m.getCheckpoint()))
                     : e.null(mloc);
    SmallVector<int64_t> lay = {0, 1, 1, 1, 1, 1, 1};
    if (auto it = initial.find(m.getSymName()); it != initial.end())
      lay = it->second;
    Value layout = e.array(mloc, (m.getSymName() + "_layout").str(),
                           ArrayRef<int64_t>(lay));
    SmallVector<Value> args = {prog, e.string(mloc, m.getSymName()), arch,
                               e.int64(mloc, m.getTrainable())};
    for (double x : adam)
      args.push_back(e.float64(mloc, x));
    args.append({ckpt, layout});
    e.call(mloc, "rlhf_prog_add_model", e.voidTy, args);
    e.call(mloc, "rlhf_prog_set_model_rope", e.voidTy,
           {prog, e.string(mloc, m.getSymName()),
            e.float64(mloc, a.getRopeTheta().convertToDouble()),
            e.float64(mloc, a.getNormEps().convertToDouble()),
            e.float64(mloc, a.getRopeFactor().convertToDouble()),
            e.float64(mloc, a.getRopeLowFreqFactor().convertToDouble()),
            e.float64(mloc, a.getRopeHighFreqFactor().convertToDouble()),
            e.int64(mloc, a.getRopeOriginalMaxSeq())});
    // The decay's horizon is the iterations the program trains the model
    // (its steps less the train calls' `frozen_steps`, which sema has made
    // agree), not --steps: a run stopped early and resumed follows the same
    // rates.
    if (auto o = m.getOptimizerAttr();
        o && m.getTrainable() &&
        (o.getSchedule() != "constant" || o.getWarmupSteps() > 0)) {
      int64_t frozen = 0;
      alg.walk([&](r::TrainStepOp t) {
        if (t.getModel() == m.getSymName())
          if (auto k = t.getSettings().getAs<FloatAttr>("frozen_steps"))
            frozen = int64_t(k.getValueAsDouble());
      });
      e.call(
          mloc, "rlhf_prog_set_model_schedule", e.voidTy,
          {prog, e.string(mloc, m.getSymName()),
           e.string(mloc, o.getSchedule()), e.int64(mloc, o.getWarmupSteps()),
           e.int64(mloc, o.getDecaySteps()
                             ? o.getDecaySteps()
                             : std::max<int64_t>(1, alg.getSteps() - frozen)),
           e.float64(mloc, o.getMinLr().convertToDouble())});
    }
  }
  for (r::DatasetOp d : datasets) {
    Location dloc = d.getLoc();
    auto rec = cast<r::RecordType>(d.getBatchType());
    int64_t batch = 0, promptLen = 0, seqLen = 0, answerLen = 0;
    std::string fields;
    for (auto [name, type] : llvm::zip(rec.getNames(), rec.getTypes())) {
      auto t = cast<RankedTensorType>(type);
      batch = t.getDimSize(0);
      StringRef n = name.getValue();
      // `label` is one number per row, and says nothing of the lengths.
      if (t.getRank() == 2)
        (n == "prompt"   ? promptLen
         : n == "answer" ? answerLen
                         : seqLen) = t.getDimSize(1);
      fields += (fields.empty() ? "" : ",") + n.str();
    }
    // max_response_len: whole sequences are P + R; answers are R wide.
    int64_t responseLen = seqLen && promptLen ? seqLen - promptLen : answerLen;
    if (!promptLen && seqLen)
      promptLen = seqLen - responseLen;
    std::string path = resolveFrom(dloc, d.getPath());
    e.call(dloc, "rlhf_prog_add_dataset", e.voidTy,
           {prog, e.string(dloc, d.getSymName()), e.string(dloc, path),
            e.int64(dloc, batch), e.int64(dloc, promptLen),
            e.int64(dloc, responseLen), e.string(dloc, fields)});
    if (auto tmpl = d.getPromptTemplate())
      e.call(dloc, "rlhf_prog_set_dataset_template", e.voidTy,
             {prog, e.string(dloc, d.getSymName()), e.string(dloc, *tmpl)});
  }
  // One tokenizer serves the program (the front end checks that models
  // naming one agree).
  for (r::ModelOp m : models)
    if (auto tok = m.getTokenizer()) {
      e.call(m.getLoc(), "rlhf_prog_set_tokenizer", e.voidTy,
             {prog, e.string(m.getLoc(), resolveFrom(m.getLoc(), *tok))});
      break;
    }
}
