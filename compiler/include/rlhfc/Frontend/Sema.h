//===- Sema.h - checked .rlhf programs --------------------------*- C++ -*-===//
//
// Sema resolves names and presets, checks declarations, instantiates each
// `run` of an algorithm with its models and dataset, and types every value.
// The result is what MLIRGen lowers. All errors go through the MLIR
// diagnostic engine with the location of the offending source.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_FRONTEND_SEMA_H
#define RLHFC_FRONTEND_SEMA_H

#include "rlhf/runtime/HfConfig.h"
#include "rlhfc/Frontend/AST.h"
#include "rlhfc/Frontend/FnIR.h"
#include "rlhfc/Frontend/Types.h"

#include "mlir/Support/LogicalResult.h"

#include <map>
#include <memory>
#include <optional>

namespace rlhfc::sema {

struct Hardware {
  std::string name;
  mlir::LocationAttr loc;
  double bf16Flops = 0;        ///< FLOP/s, dense
  double hbmBytes = 0;         ///< bytes
  double hbmBandwidth = 0;     ///< bytes/s
  double nvlinkBandwidth = 0;  ///< bytes/s per GPU, one direction
  double networkBandwidth = 0; ///< bytes/s per GPU, one direction
  double hostBandwidth = 0;    ///< bytes/s per GPU from host memory; 0: unknown
};

struct Arch {
  std::string name;
  mlir::LocationAttr loc;
  int64_t layers = 0, hidden = 0, heads = 0, kvHeads = 0, ffn = 0, vocab = 0;
  int64_t maxSeq = 4096;
  bool tieEmbeddings = false;
  bool qkvBias = false; ///< q/k/v biases (Qwen2)
  double ropeTheta = 10000.0;
  double normEps = 1e-5;
  rlhf::RopeScaling rope; ///< LLaMA-3's
  std::string hfDir;      ///< the checkpoint imported by `: hf("dir")`

  int64_t headDim() const { return heads ? hidden / heads : 0; }
  rlhf::ModelShape shape(bool valueHead = false) const;
  /// Parameters of the decoder with an LM head (value head: vocab -> 1).
  int64_t paramCount(bool valueHead = false) const;
};

struct Cluster {
  std::string name;
  mlir::LocationAttr loc;
  int64_t nodes = 1, gpusPerNode = 8;
  const Hardware *hardware = nullptr;
  int64_t gpus() const { return nodes * gpusPerNode; }
};

enum class Head { LM, Value };

struct Optimizer {
  std::string kind = "adam";
  double lr = 1e-6, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.0,
         gradClip = 1.0;
  /// The learning rate per iteration: `warmupSteps` iterations rising
  /// linearly to `lr`, then `schedule` (constant, linear or cosine) down to
  /// `minLr` at iteration `decaySteps` (0: the run's steps).
  std::string schedule = "constant";
  int64_t warmupSteps = 0, decaySteps = 0;
  double minLr = 0.0;
  mlir::LocationAttr loc; ///< the `adam(...)` call
  bool scheduled() const { return warmupSteps > 0 || schedule != "constant"; }
};

struct Model {
  std::string name;
  mlir::LocationAttr loc;
  Arch arch;
  bool trainable = false;
  Head head = Head::LM;
  Optimizer optimizer;
  std::string checkpoint;
  std::string tokenizer; ///< a sentencepiece model, as written
  mlir::LocationAttr tokenizerLoc;
};

struct Dataset {
  std::string name;
  mlir::LocationAttr loc;
  std::string path;
  int64_t batch = 0, maxPromptLen = 0, maxResponseLen = 0;
  std::vector<std::string> fields; ///< the columns read from each row
  /// `template`: the text of each row's `prompt`, with `{column}`
  /// placeholders; `type` then has `prompt` even when `fields` lacks it.
  std::optional<std::string> promptTemplate;
  RecordType type;
};

/// A pinned mesh and strategy from `@place(...)`.
struct Placement {
  mlir::LocationAttr loc;
  int64_t firstGpu = 0, numGpus = 0; ///< global GPU index range
  int64_t dp = 1, tp = 1, pp = 1, microBatches = 1;
  int64_t sp = 1; ///< sequence parallelism (Ulysses)
  bool offload = false; ///< weights rest in host memory between calls
  mlir::LocationAttr offloadLoc;
  bool recompute = false; ///< train: recompute activations in backward
  mlir::LocationAttr recomputeLoc;
  bool zero = false; ///< train: shard optimizer state over dp (ZeRO-1)
  mlir::LocationAttr zeroLoc;
};

/// One node of the instantiated dataflow graph.
struct Node {
  enum class Kind { Generate, Inference, Train, Host, Ema };
  Kind kind;
  std::string name; ///< bound result name, or "" when unbound
  mlir::LocationAttr loc;
  const Model *model = nullptr;  ///< model calls and the target of ema
  const Model *source = nullptr; ///< ema source
  std::string builtin;           ///< host functions and losses
  /// A function written in the language (`builtin` is its name): its body
  /// inlined for this call, shared by the train call of a loss.
  std::shared_ptr<const FnBody> fn;
  struct Input {
    std::string param; ///< the callee's parameter name
    int producer = -1; ///< node index, or -1 for the dataset
    std::string field; ///< field of the producer's record
    TensorType type;
    const Dataset *dataset = nullptr; ///< a dataset column's dataset
  };
  std::vector<Input> inputs;
  /// Scalar settings: max_new_tokens, clip, minibatches...
  std::vector<std::pair<std::string, double>> attrs;
  /// String settings: script_reward's command.
  std::vector<std::pair<std::string, std::string>> textAttrs;
  RecordType result;
  std::optional<Placement> placement;

  double attr(llvm::StringRef key, double fallback) const;
};
llvm::StringRef nodeKindName(Node::Kind k);

struct RunSettings {
  int64_t steps = 1, seed = 1, saveInterval = 0;
  /// Versions generation may run ahead of training (0: synchronous).
  int64_t staleness = 0;
  /// `eval = DATASET`: held-out prompts the policy's samples are scored on
  /// before the first step, every `evalInterval` steps and after the last
  /// (SemaEval.cpp).
  const Dataset *evalDataset = nullptr;
  int64_t evalInterval = 0;
  /// `eval_samples = k`: samples per held-out prompt, drawn as the
  /// generate draws them when k > 1 (mean@k and best@k); one greedy one
  /// when 1.
  int64_t evalSamples = 1;
  mlir::LocationAttr evalLoc, evalSamplesLoc;
};

/// `@filter_groups(...)` on a statement: DAPO's dynamic sampling. The
/// statement's score decides which prompts' groups an iteration keeps; the
/// statements before it run again on further batches until `dataset.batch`
/// groups vary (SemaFilter.cpp).
struct FilterGroups {
  mlir::LocationAttr loc; ///< the annotation
  int node = -1;          ///< the annotated statement's node
  std::string field;      ///< its score field
  int64_t group = 0;      ///< samples per prompt: the generate's n
  int64_t maxRounds = 8;  ///< rounds drawn at most per iteration
  /// Prompts a round draws (gen_batch): the dataset's batch unless given.
  int64_t genBatch = 0;
  double minStd = 0;      ///< a group varies when its scores' std exceeds it
  /// Rounds the planner prices per iteration (the runtime reports the
  /// measured mean).
  double expectedRounds = 1;
};

/// An algorithm bound to concrete models and a dataset by a `run`.
struct Instance {
  std::string algorithm;
  mlir::LocationAttr loc;
  const Cluster *cluster = nullptr;
  const Dataset *dataset = nullptr;
  std::vector<const Model *> models;
  /// The run's values of the algorithm's int and float parameters.
  std::map<std::string, double> numbers;
  std::vector<Node> nodes;
  RunSettings settings;
  std::optional<FilterGroups> filter;
};

struct Program {
  std::vector<std::unique_ptr<ast::Module>> modules; ///< main module first
  std::map<std::string, Hardware> hardware;
  std::map<std::string, Arch> archs;
  std::map<std::string, Cluster> clusters;
  std::map<std::string, Model> models;
  std::map<std::string, Dataset> datasets;
  std::map<std::string, const ast::AlgorithmDecl *> algorithms;
  std::map<std::string, const ast::FnDecl *> functions;
  std::vector<Instance> instances;
  /// Where the prelude should have been, when --stdlib's folder has none
  /// (its estimators and losses are then unknown functions).
  std::string missingPrelude;
};

/// The modules in the order their names are declared: the imports, then the
/// main module, then the prelude's, so that a name clashing with an import
/// is reported where it is redeclared and the program's functions shadow
/// the prelude's.
std::vector<const ast::Module *> declarationOrder(const Program &p);

/// Checks `p.modules` and fills the rest of `p`. Emits every error it finds
/// (not only the first) and fails when there was one.
mlir::LogicalResult check(Program &p, mlir::MLIRContext &ctx);

} // namespace rlhfc::sema

#endif // RLHFC_FRONTEND_SEMA_H
