//===- RLHFOps.cpp - rlhf dialect operations and verifiers ----------------===//

#include "rlhf/IR/RLHFOps.h"
#include "FnBody.h"
#include "Verifiers.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::rlhf;
using namespace mlir::rlhf::verifiers;

//===----------------------------------------------------------------------===//
// Signatures of host functions and losses
//===----------------------------------------------------------------------===//

namespace {

using TK = TensorKind;

/// A batch tensor as the runtime holds it: `rank` static dimensions (rank 2
/// for token ids: rows x positions), each at least 1.
LogicalResult checkBatchTensor(Operation *op, StringRef what, Type t,
                               int64_t rank) {
  auto rt = cast<RankedTensorType>(t);
  if (rt.getRank() != rank)
    return op->emitOpError()
           << what << " must have " << rank
           << (rank == 1 ? " dimension" : " dimensions") << ", got " << t;
  if (!rt.hasStaticShape() ||
      llvm::any_of(rt.getShape(), [](int64_t d) { return d < 1; }))
    return op->emitOpError() << what << " must have static, positive "
                             << "dimensions, got " << t;
  return success();
}

/// The inputs of the host functions written in C++.
ArrayRef<TensorKind> expectedInputs(ComputeKind k) {
  static const TensorKind match[] = {TK::tokens, TK::answer};
  switch (k) {
  case ComputeKind::exact_match:
  case ComputeKind::script_reward:
    return match;
  case ComputeKind::fn:
    break; // the body's block arguments say
  }
  return {};
}

/// Checks operand kinds against a signature, naming the first mismatch.
LogicalResult verifyInputKinds(Operation *op, StringRef callee,
                               ValueRange inputs,
                               ArrayRef<TensorKind> expected) {
  if (inputs.size() != expected.size())
    return op->emitOpError() << "'" << callee << "' takes " << expected.size()
                             << " inputs, got " << inputs.size();
  for (auto [i, v, k] : llvm::enumerate(inputs, expected)) {
    TensorKind got = *getTensorKind(v.getType());
    if (got != k)
      return op->emitOpError() << "input #" << i << " of '" << callee
                               << "' must hold " << stringifyTensorKind(k)
                               << ", but holds " << stringifyTensorKind(got);
    if (failed(checkBatchTensor(op, "input #" + std::to_string(i), v.getType(),
                                2)))
      return failure();
  }
  return success();
}

int64_t batchOf(Type t) {
  auto rt = cast<RankedTensorType>(t);
  return rt.getRank() ? rt.getDimSize(0) : 1;
}

//===----------------------------------------------------------------------===//
// Placement
//===----------------------------------------------------------------------===//

/// A call's `rows` split over its dp groups and then into micro-batches.
/// (Sequences need not split over sp: the runtime pads them.)
LogicalResult verifyRowsSplit(Operation *op, int64_t rows,
                              StrategyAttr strategy) {
  if (!strategy)
    return success();
  if (rows % (strategy.getDp() * strategy.getMbs()))
    return op->emitOpError()
           << "batch of " << rows << " rows does not split "
           << "into dp = " << strategy.getDp()
           << " x mbs = " << strategy.getMbs() << " equal parts";
  return success();
}

template <typename CallOp>
LogicalResult verifyCallSymbols(CallOp op, SymbolTableCollection &symbols,
                                ModelOp &model) {
  auto m = lookupModel(op, symbols, op.getModelAttr());
  if (failed(m))
    return failure();
  model = *m;
  StrategyAttr st = op.getStrategyAttr();
  if (st && st.getOffload() && model.getTrainable())
    return op.emitOpError() << "offloads @" << model.getSymName()
                            << ", which is trainable; only frozen models "
                               "rest in host memory";
  // What the runtime's model can split, as Sema's @place checks it.
  ArchAttr arch = model.getArch();
  if (st && (arch.getHeads() % st.getTp() || arch.getKvHeads() % st.getTp()))
    return op.emitOpError()
           << "tp = " << st.getTp() << " does not divide the "
           << arch.getHeads() << " heads and " << arch.getKvHeads()
           << " kv heads of @" << model.getSymName();
  if (st && st.getPp() > arch.getLayers())
    return op.emitOpError()
           << "pp = " << st.getPp() << " exceeds the " << arch.getLayers()
           << " layers of @" << model.getSymName();
  return verifyLayoutOnCluster(op, clusterOf(op, symbols), op.getMeshAttr(),
                               st);
}

/// Enum attributes print as a bare keyword: `head lm`, `gae(...)`.
template <typename EnumAttrT>
ParseResult parseEnumKeyword(OpAsmParser &parser, EnumAttrT &attr) {
  StringRef word;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&word))
    return failure();
  using Enum = decltype(std::declval<EnumAttrT>().getValue());
  std::optional<Enum> value = symbolizeEnum<Enum>(word);
  if (!value)
    return parser.emitError(loc)
           << "unknown " << EnumAttrT::getMnemonic() << " '" << word << "'";
  attr = EnumAttrT::get(parser.getContext(), *value);
  return success();
}

template <typename EnumAttrT>
void printEnumKeyword(OpAsmPrinter &printer, Operation *, EnumAttrT attr) {
  printer << stringifyEnum(attr.getValue());
}

} // namespace

//===----------------------------------------------------------------------===//
// Helpers shared with the other op files (Verifiers.h)
//===----------------------------------------------------------------------===//

LogicalResult verifiers::checkRange(Operation *op, StringRef what,
                                    int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi)
    return op->emitOpError()
           << what << " is " << value << "; it must be " << lo << " to " << hi;
  return success();
}

LogicalResult verifiers::verifyMeshOnCluster(Operation *op, ClusterOp cluster,
                                             MeshAttr mesh, StringRef what) {
  // MeshAttr bounds both by kMaxGpus, so the sum cannot overflow.
  if (mesh.getFirst() + mesh.getSize() > cluster.getNumGpus())
    return op->emitOpError()
           << what << "mesh <" << mesh.getFirst() << ", " << mesh.getSize()
           << "> exceeds the " << cluster.getNumGpus() << " GPUs of cluster @"
           << cluster.getSymName();
  return success();
}

LogicalResult verifiers::verifyLayout(Operation *op, MeshAttr mesh,
                                      StrategyAttr strategy, StringRef what) {
  if (!mesh && !strategy)
    return success();
  if (!mesh || !strategy)
    return op->emitOpError() << what << "needs both a mesh and a strategy";
  if (strategy.getNumDevices() != mesh.getSize()) {
    auto d = op->emitOpError();
    d << what << "strategy dp*tp*pp";
    if (strategy.getSp() > 1)
      d << "*sp";
    d << " = " << strategy.getDp() << "*" << strategy.getTp() << "*"
      << strategy.getPp();
    if (strategy.getSp() > 1)
      d << "*" << strategy.getSp();
    return d << " = " << strategy.getNumDevices() << " does not match the "
             << mesh.getSize() << " devices of its mesh";
  }
  if (strategy.getSp() > 1 && isa<GenerateOp>(op))
    return op->emitOpError()
           << what << "generates with sp = " << strategy.getSp()
           << "; generation runs with sp = 1 (its decode steps have one "
              "token per sequence to split)";
  return success();
}

LogicalResult verifiers::verifyLayoutOnCluster(Operation *op, ClusterOp cluster,
                                               MeshAttr mesh,
                                               StrategyAttr strategy,
                                               StringRef what) {
  if (!mesh || !strategy || !cluster)
    return success();
  if (failed(verifyMeshOnCluster(op, cluster, mesh, what)))
    return failure();
  int64_t tp = strategy.getTp();
  if (int64_t g = tpGroupAcrossNodes(mesh.getFirst(), mesh.getSize(), tp,
                                     cluster.getGpusPerNode());
      g >= 0)
    return op->emitOpError() << what << "tensor-parallel group of " << tp
                             << " GPUs starting at GPU " << g
                             << " spans two nodes; tp must stay within a node";
  return success();
}

ClusterOp verifiers::clusterOf(Operation *op, SymbolTableCollection &symbols) {
  auto alg = op->getParentOfType<AlgorithmOp>();
  if (!alg)
    return nullptr;
  return symbols.lookupNearestSymbolFrom<ClusterOp>(alg, alg.getClusterAttr());
}

FailureOr<ModelOp> verifiers::lookupModel(Operation *op,
                                          SymbolTableCollection &symbols,
                                          FlatSymbolRefAttr ref) {
  auto model = symbols.lookupNearestSymbolFrom<ModelOp>(op, ref);
  if (!model)
    return op->emitOpError()
           << "'" << ref.getValue() << "' does not name an rlhf.model";
  return model;
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

LogicalResult ClusterOp::verify() {
  if (failed(checkRange(*this, "nodes", int64_t(getNodes()), 1, kMaxNodes)) ||
      failed(checkRange(*this, "gpus_per_node", int64_t(getGpusPerNode()), 1,
                        kMaxGpusPerNode)))
    return failure();
  return success();
}

LogicalResult ModelOp::verify() {
  if (getOptimizerAttr() && !getTrainable())
    return emitOpError() << "has optimizer settings but is not trainable";
  return success();
}

LogicalResult DatasetOp::verify() {
  // The runtime reads rows into these shapes: rows first, and token ids and
  // answers as rows x positions.
  RecordType rec = getBatchType();
  for (auto [name, type] : llvm::zip(rec.getNames(), rec.getTypes())) {
    std::optional<TensorKind> kind = getTensorKind(type);
    bool text = kind == TensorKind::tokens || kind == TensorKind::answer;
    if (text && type.getRank() != 2)
      return emitOpError() << "field '" << name.getValue()
                           << "' holds text: it must be rows x positions, got "
                           << type;
    if (failed(checkBatchTensor(*this, "field '" + name.getValue().str() + "'",
                                type, std::max<int64_t>(1, type.getRank()))))
      return failure();
  }
  return success();
}

LogicalResult LoadOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto ds = symbols.lookupNearestSymbolFrom<DatasetOp>(*this, getDatasetAttr());
  if (!ds)
    return emitOpError() << "'" << getDataset()
                         << "' does not name an rlhf.dataset";
  // Dynamic sampling may draw rows other than a batch (gen_batch): the
  // fields are the batch type's, with as many rows as the load reads.
  RecordType want = ds.getBatchType(), got = getBatch().getType();
  const int64_t batch =
      want.getTypes().empty() ? 0 : want.getTypes().front().getDimSize(0);
  const int64_t rows =
      got.getTypes().empty() ? 0 : got.getTypes().front().getDimSize(0);
  if (got != want &&
      (batch <= 0 || rows <= 0 || got != keptRowsType(want, batch, rows)))
    return emitOpError() << "result type " << got
                         << " differs from the batch type of @" << getDataset()
                         << ", " << want << ", in more than its rows";
  return success();
}

LogicalResult FieldOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        ValueRange operands,
                                        DictionaryAttr attrs,
                                        OpaqueProperties props, RegionRange,
                                        SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props);
  auto rec = dyn_cast<RecordType>(adaptor.getRecord().getType());
  RankedTensorType t = rec ? rec.getFieldType(adaptor.getName()) : nullptr;
  if (!t)
    return emitOptionalError(loc, "'rlhf.field' op record has no field '",
                             adaptor.getName(), "'");
  inferred.push_back(t);
  return success();
}

//===----------------------------------------------------------------------===//
// Model calls
//===----------------------------------------------------------------------===//

LogicalResult GenerateOp::verify() {
  if (getTensorKind(getPrompt().getType()) != TensorKind::tokens)
    return emitOpError() << "prompt must hold tokens";
  if (failed(checkBatchTensor(*this, "prompt", getPrompt().getType(), 2)) ||
      failed(checkRange(*this, "max_new_tokens", int64_t(getMaxNewTokens()), 1,
                        kMaxNewTokens)) ||
      failed(checkRange(*this, "n", int64_t(getN()), 1, kMaxSamples)) ||
      failed(checkRange(*this, "staleness", int64_t(getStaleness()), 0,
                        kMaxStaleness)))
    return failure();
  if (auto alg = (*this)->getParentOfType<AlgorithmOp>();
      alg && getStaleness() > alg.getStaleness())
    return emitOpError() << "may lag " << getStaleness()
                         << " versions, but its algorithm's staleness is "
                         << alg.getStaleness();
  auto rec = cast<RecordType>(getResult().getType());
  for (StringRef f : {"seq", "logprobs"})
    if (!rec.getFieldType(f))
      return emitOpError() << "result must have a '" << f << "' field";
  if (failed(verifyLayout(*this, getMeshAttr(), getStrategyAttr())))
    return failure();
  return verifyRowsSplit(*this,
                         batchOf(getPrompt().getType()) * int64_t(getN()),
                         getStrategyAttr());
}

LogicalResult GenerateOp::verifySymbolUses(SymbolTableCollection &symbols) {
  ModelOp model;
  if (failed(verifyCallSymbols(*this, symbols, model)))
    return failure();
  if (model.getHead() != Head::lm)
    return emitOpError() << "cannot generate with @" << model.getSymName()
                         << ": it has a value head";
  int64_t maxSeq = model.getArch().getMaxSeq(),
          len = cast<RankedTensorType>(getPrompt().getType()).getDimSize(1) +
                int64_t(getMaxNewTokens());
  if (len > maxSeq)
    return emitOpError() << "generates up to " << len << " positions, beyond "
                         << "the " << maxSeq << " of @" << model.getSymName();
  return success();
}

LogicalResult InferenceOp::verify() {
  if (getTensorKind(getSeq().getType()) != TensorKind::tokens)
    return emitOpError() << "input must hold tokens";
  if (failed(checkBatchTensor(*this, "input", getSeq().getType(), 2)) ||
      failed(verifyLayout(*this, getMeshAttr(), getStrategyAttr())))
    return failure();
  return verifyRowsSplit(*this, batchOf(getSeq().getType()), getStrategyAttr());
}

LogicalResult InferenceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  ModelOp model;
  if (failed(verifyCallSymbols(*this, symbols, model)))
    return failure();
  auto rec = cast<RecordType>(getResult().getType());
  StringRef want = model.getHead() == Head::lm ? "logprobs" : "values";
  if (!rec.getFieldType(want))
    return emitOpError() << "result of @" << model.getSymName()
                         << " must have a '" << want << "' field";
  return success();
}

LogicalResult TrainStepOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input: the loss reads the "
                            "trained model's outputs on a batch";
  // Rows first: token ids [N, S], per-sample scores [N].
  for (auto [i, in] : llvm::enumerate(getInputs())) {
    int64_t rank = cast<RankedTensorType>(in.getType()).getRank();
    if (failed(checkBatchTensor(*this, "input #" + std::to_string(i),
                                in.getType(), std::max<int64_t>(1, rank))))
      return failure();
  }
  if (failed(verifyFnBody(*this, getFnAttr(), getInputs(), getBody(),
                          /*loss=*/true,
                          cast<RecordType>(getStats().getType()).getTypes())))
    return failure();
  if (failed(checkRange(*this, "minibatches", int64_t(getMinibatches()), 1,
                        kMaxMinibatches)) ||
      failed(checkRange(*this, "epochs", int64_t(getEpochs()), 1, kMaxEpochs)))
    return failure();
  // The stats are the loss and its metrics: scalars.
  for (RankedTensorType t : cast<RecordType>(getStats().getType()).getTypes())
    if (t.getRank() != 0)
      return emitOpError() << "stats fields are scalars (the loss and its "
                              "metrics), got "
                           << t;
  int64_t n = batchOf(getInputs().front().getType());
  if (n % int64_t(getMinibatches()))
    return emitOpError() << "batch of " << n << " does not split into "
                         << getMinibatches() << " minibatches";
  if (failed(verifyLayout(*this, getMeshAttr(), getStrategyAttr())))
    return failure();
  return verifyRowsSplit(*this, n / int64_t(getMinibatches()),
                         getStrategyAttr());
}

/// The head a loss trains: that of the model outputs it reads (the body's
/// verifier keeps them to one head).
static Head trainedHead(TrainStepOp op) {
  Head head = Head::lm;
  op.getBody().walk([&](ModelOutputOp m) {
    if (m.getOutput() == ModelOutput::values ||
        m.getOutput() == ModelOutput::score)
      head = Head::value;
  });
  return head;
}

LogicalResult TrainStepOp::verifySymbolUses(SymbolTableCollection &symbols) {
  ModelOp model;
  if (failed(verifyCallSymbols(*this, symbols, model)))
    return failure();
  if (!model.getTrainable())
    return emitOpError() << "cannot train @" << model.getSymName()
                         << ": it is not trainable";
  Head head = trainedHead(*this);
  if (model.getHead() != head)
    return emitOpError() << "loss '" << getFn() << "' needs a model with a "
                         << stringifyHead(head) << " head, but @"
                         << model.getSymName() << " has a "
                         << stringifyHead(model.getHead()) << " head";
  return success();
}

/// script_reward's settings where present: the lowering requires the
/// command, which the front end attaches after building the op.
static LogicalResult verifyScriptReward(ComputeOp op) {
  DictionaryAttr s = op.getSettings();
  if (Attribute c = s.get("command")) {
    auto text = dyn_cast<StringAttr>(c);
    if (!text || text.getValue().empty())
      return op.emitOpError()
             << "'command' of script_reward must be a non-empty string";
  }
  // An absent number passes; one that is not a float attribute fails.
  auto number = [&](StringRef key, double absent) {
    Attribute a = s.get(key);
    auto f = dyn_cast_or_null<FloatAttr>(a);
    return !a ? absent : f ? f.getValueAsDouble() : -1.0;
  };
  if (number("workers", 1) < 1)
    return op.emitOpError() << "'workers' of script_reward must be at least 1";
  if (number("timeout", 1) <= 0)
    return op.emitOpError() << "'timeout' of script_reward must be positive";
  return success();
}

void ComputeOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  // A reward program may keep state or count its calls: it reads and
  // writes the world outside the program.
  if (getKind() == ComputeKind::script_reward) {
    effects.emplace_back(MemoryEffects::Read::get());
    effects.emplace_back(MemoryEffects::Write::get());
  }
}

LogicalResult ComputeOp::verify() {
  if (getKind() == ComputeKind::script_reward &&
      failed(verifyScriptReward(*this)))
    return failure();
  if (getKind() != ComputeKind::fn)
    return failure(
        failed(verifyNoFnBody(*this, getFnAttr(), getBody())) ||
        failed(verifyInputKinds(*this, stringifyComputeKind(getKind()),
                                getInputs(), expectedInputs(getKind()))));
  auto rec = cast<RecordType>(getResult().getType());
  return verifyFnBody(*this, getFnAttr(), getInputs(), getBody(),
                      /*loss=*/false, rec.getTypes());
}

LogicalResult EmaOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto target = lookupModel(*this, symbols, getTargetAttr());
  auto source = lookupModel(*this, symbols, getSourceAttr());
  if (failed(target) || failed(source))
    return failure();
  if (*target == *source)
    return emitOpError() << "cannot average a model into itself";
  if (target->getArch() != source->getArch() ||
      target->getHead() != source->getHead())
    return emitOpError() << "@" << source->getSymName() << " and @"
                         << target->getSymName()
                         << " have different architectures";
  double decay = getDecay().convertToDouble();
  if (decay < 0 || decay > 1)
    return emitOpError() << "decay must be in [0, 1]";
  return success();
}

#define GET_OP_CLASSES
#include "rlhf/IR/RLHFOps.cpp.inc"
