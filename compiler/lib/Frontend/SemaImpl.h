//===- SemaImpl.h - the Sema class, shared by its files (private) -*- C++
//-*-===//
//
// Sema is one class split by concern: Sema.cpp (driver, symbols,
// diagnostics), SemaEntities.cpp (properties, constants, hardware, archs,
// clusters, models), SemaDataset.cpp (datasets and their templates),
// SemaRun.cpp (algorithm names, runs, values, statements), SemaCalls.cpp
// (model methods and built-ins), SemaSettings.cpp (their named settings),
// SemaFnCall.cpp (calls of .rlhf functions) and SemaPlace.cpp (@place).
// Private to compiler/lib/Frontend; it names the AST's types unqualified,
// as those files do.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_LIB_FRONTEND_SEMAIMPL_H
#define RLHFC_LIB_FRONTEND_SEMAIMPL_H

#include "FnCheck.h"
#include "HfImport.h"
#include "mlir/IR/Diagnostics.h"
#include "rlhf/IR/RLHFOps.h"
#include "rlhfc/Frontend/Builtins.h"
#include "rlhfc/Frontend/Properties.h"
#include "rlhfc/Frontend/Sema.h"
#include "rlhfc/Frontend/Units.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>
#include <functional>
#include <set>
#include <tuple>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rlhfc::sema::detail {

using namespace rlhfc::ast;
using llvm::formatv;
using llvm::StringRef;

/// The head whose outputs an fn loss reads.
inline Head fnHead(const FnBody &b) {
  for (const FnOp &o : b.ops)
    if (o.op == "values" || o.op == "score")
      return Head::Value;
  return Head::LM;
}

/// The closest candidate within edit distance 2, for "did you mean".
inline std::string closest(StringRef word,
                           llvm::ArrayRef<std::string> candidates) {
  std::string best;
  unsigned bestDist = 3;
  for (const std::string &c : candidates) {
    unsigned d = word.edit_distance(c, true, bestDist);
    if (d < bestDist) {
      bestDist = d;
      best = c;
    }
  }
  return best;
}

/// "a model", "an arch".
inline std::string withArticle(StringRef noun) {
  bool vowel = !noun.empty() && StringRef("aeiou").contains(noun.front());
  return (vowel ? "an " : "a ") + noun.str();
}

/// Whether `e` is a call of `adaptive_kl` or `adaptive_entropy`, a
/// coefficient the run adapts; only a number argument of a function's call
/// may be one.
inline bool isAdaptiveControl(const Expr &e) {
  return e.kind == Expr::Kind::Call && e.base &&
         e.base->kind == Expr::Kind::Name && lookupControl(e.base->text);
}

inline std::string didYouMean(StringRef word,
                              llvm::ArrayRef<std::string> candidates) {
  std::string c = closest(word, candidates);
  return c.empty() ? "" : "; did you mean '" + c + "'?";
}

/// Per node, whether its rows reach a node through `producers` (node
/// indices of its inputs; -1, a dataset column, is skipped), through any
/// nodes between; with `stopAtGenerates`, not through a generate's inputs
/// (SemaGroups.cpp).
std::vector<char> nodesFeeding(const std::vector<Node> &nodes,
                               std::vector<int> producers,
                               bool stopAtGenerates = false);
/// The generate nodes among them, up to the first generate on each path.
std::vector<int> generatesFeeding(const std::vector<Node> &nodes,
                                  std::vector<int> producers);

/// A scalar with a unit dimension after folding constants.
struct Scalar {
  double value = 0;
  bool isInteger = true;
  UnitDim dim = UnitDim::None;
};

class Sema {
public:
  Sema(Program &p, mlir::MLIRContext &ctx)
      : p(p), ctx(ctx),
        fns([this](mlir::Location l,
                   const llvm::Twine &m) { return error(l, m); },
            [](mlir::Location l, const llvm::Twine &m) {
              return mlir::emitWarning(l, m);
            }) {}

  mlir::LogicalResult run();

private:
  // ---- diagnostics -------------------------------------------------------
  mlir::InFlightDiagnostic error(mlir::Location loc, const llvm::Twine &msg);
  /// An unknown function `name` (with the hint of a near name), noting a
  /// missing prelude, whose functions it may have meant.
  void unknownFunction(mlir::Location loc, llvm::StringRef name,
                       const std::string &hint);
  void warning(mlir::Location loc, const llvm::Twine &msg);

  // ---- symbols -----------------------------------------------------------
  struct Symbol {
    enum Kind { Entity, Algorithm, Function } kind;
    const EntityDecl *entity = nullptr;
    const AlgorithmDecl *algorithm = nullptr;
    mlir::Location loc;
    StringRef kindName() const {
      return kind == Algorithm  ? "algorithm"
             : kind == Function ? "function"
                                : entityKindName(entity->kind);
    }
  };

  void collectSymbols();

  std::vector<std::string> namesOfKind(std::optional<EntityKind> k);

  /// Looks up `name` as an entity of kind `k`, with a located error naming
  /// what was found instead.
  const EntityDecl *lookupEntity(StringRef name, EntityKind k,
                                 mlir::Location use, StringRef role);

  // ---- properties --------------------------------------------------------
  using PropMap = llvm::StringMap<const Property *>;

  /// Gathers the properties of `d` and its bases (the derived ones win),
  /// rejecting unknown and duplicate names.
  bool gatherProps(const EntityDecl &d, llvm::ArrayRef<PropSpec> specs,
                   PropMap &out, std::vector<const EntityDecl *> &chain);

  bool checkRequired(const EntityDecl &d, llvm::ArrayRef<PropSpec> specs,
                     const PropMap &props);

  // ---- constant expressions ----------------------------------------------
  /// Folds `e` to a number. Inside an algorithm body a name is one of its
  /// `int` or `float` parameters, bound to a constant by the run being
  /// checked (`numberScope`); elsewhere names are not numbers.
  std::optional<Scalar> evalScalar(const Expr &e);

  std::optional<double> evalNumber(const Expr &e, UnitDim dim, StringRef what);

  /// A positive integer within [lo, hi].
  std::optional<int64_t> evalInt(const Expr &e, StringRef what, int64_t lo = 1,
                                 int64_t hi = int64_t(1) << 40);

  std::optional<std::string> evalString(const Expr &e, StringRef what);

  std::optional<std::string> evalName(const Expr &e, StringRef what);

  template <typename T>
  void setInt(const PropMap &m, StringRef key, T &dst, int64_t lo = 1,
              int64_t hi = int64_t(1) << 40) {
    if (auto *prop = m.lookup(key))
      if (checkHasValue(*prop))
        if (auto v = evalInt(*prop->value, "'" + key.str() + "'", lo, hi))
          dst = *v;
  }

  void setNum(const PropMap &m, StringRef key, UnitDim dim, double &dst);
  bool flag(const PropMap &m, StringRef key);
  bool checkHasValue(const Property &prop);

  // ---- entities ----------------------------------------------------------
  void resolveEntity(const std::string &name);

  const Hardware *resolveHardware(const EntityDecl &d);

  bool fillArch(const EntityDecl &d, const PropMap &m, Arch &a);

  const Arch *resolveArch(const EntityDecl &d);

  void resolveCluster(const EntityDecl &d);

  void resolveModel(const EntityDecl &d);

  /// `rope_scaling = llama3(factor = 8, ...)` (SemaEntities.cpp).
  void parseRopeScaling(const Expr &e, rlhf::RopeScaling &r);
  /// The named number arguments of `call` into `slots` ("lr" -> &o.lr):
  /// unnamed, unknown and out-of-range (negative, or not positive unless
  /// `zeroAllowed`) ones are errors that say "{noun} setting" and show
  /// `example`. Arguments named in `others` are the caller's to read.
  void
  readNamedNumbers(const Expr &call,
                   llvm::ArrayRef<std::pair<llvm::StringRef, double *>> slots,
                   llvm::StringRef noun, llvm::StringRef example,
                   bool zeroAllowed,
                   llvm::ArrayRef<llvm::StringRef> others = {});
  /// `adam(...)` or `adamw(...)`, with its learning-rate schedule
  /// (SemaOptimizer.cpp).
  void parseOptimizer(const Expr &e, Optimizer &o);
  /// Each trained model's schedule against the run's steps.
  void checkSchedules(const Instance &inst);
  /// `eval` and `eval_interval` of a run block (SemaEval.cpp).
  void readEval(const PropMap &m, Instance &inst);
  /// What evaluation needs of the typed iteration: a dataset like the one
  /// it loads, and a score of generated samples.
  void checkEval(const Instance &inst);

  void resolveDataset(const EntityDecl &d);

  /// Located errors for a dataset's malformed `template`, or one naming a
  /// column the dataset does not list.
  void checkPromptTemplate(const Property &tp, const Dataset &ds);
  void checkCompletions(const EntityDecl &d, Dataset &ds,
                        const Property &fields, bool templated);

  // ---- algorithms: names only (bodies are typed per run) ------------------
  void checkAlgorithmNames(const AlgorithmDecl &a);

  void walkNames(const Expr &e, const llvm::StringMap<mlir::Location> &locals);

  // ---- runs: instantiate and type the dataflow ---------------------------
  /// What a name in an algorithm body stands for.
  struct Value {
    enum Kind {
      None,
      Poisoned,
      Model,
      Dataset,
      Cluster,
      Number,
      Record,
      Tensor
    } kind = None;
    const sema::Model *model = nullptr;
    const sema::Dataset *dataset = nullptr;
    const sema::Cluster *cluster = nullptr;
    double number = 0;
    bool isInteger = false;
    UnitDim dim = UnitDim::None;
    RecordType record;
    TensorType tensor;
    int producer = -1;  ///< node index, -1 = dataset
    std::string field;  ///< for tensors: the field of the producer
    std::string origin; ///< "g.seq", for messages
    mlir::LocationAttr defLoc;
  };

  struct Local {
    Value value;
    mlir::Location loc;
    bool used = false;
  };

  std::string describe(const Value &v);

  void instantiate(const RunDecl &r);

  /// A program tokenizes with one sentencepiece model: the models that name
  /// one agree.
  void checkTokenizers(const Instance &inst);

  /// An offloaded model rests in host memory in its call's layout: it has
  /// that one call, and no ema writes it.
  void checkOffloads(const Instance &inst);

  /// With staleness > 0, every loss that trains a generating model corrects
  /// for the lag of its samples (SemaAsync.cpp).
  void checkStaleness(const Instance &inst);
  /// Properties of hf() imports already checked against the checkpoint.
  std::set<const ast::Property *> hfOverridesChecked;
  /// Warns where a function's group_* ops group rows in other sizes than
  /// the samples per prompt of the generate they come from (SemaGroups.cpp).
  void checkGroups(const Instance &inst);
  /// The `gen_batch` of an algorithm's `@filter_groups`, read before its
  /// statements are typed: the dataset's rows in `env` become a round's
  /// (SemaFilter.cpp).
  void readGenBatch(const AlgorithmDecl &alg, llvm::StringMap<Local> &env);
  /// `@filter_groups` on the statement of node `node` (SemaFilter.cpp).
  void readFilterAnnotation(const Annotation &an, int node);
  /// After the filtered statement: the dataset and the results so far in
  /// `env` take the kept rows (a batch's) instead of a round's.
  void keepFilteredRows(llvm::StringMap<Local> &env);
  /// What a filter needs of the statements before it and of its score;
  /// fills in its score field and group size.
  void checkFilter(Instance &inst);

  std::optional<Value> bindParam(const Param &prm, const Expr &arg);

  std::optional<Value> evalValue(const Expr &e, llvm::StringMap<Local> &env);

  void checkStmt(const Stmt &s, llvm::StringMap<Local> &env);

  void markUsed(const Expr &e, llvm::StringMap<Local> &env);

  std::optional<Node> checkCall(const Expr &e, llvm::StringMap<Local> &env);

  /// Reads `name = value` settings of a call against the callee's table.
  bool readSettings(const Expr &call, llvm::ArrayRef<SettingSpec> specs,
                    size_t firstSetting, llvm::StringMap<Local> &env, Node &n,
                    StringRef callee);
  /// A setting given as a string, or one that needs a string (`spec.text`).
  bool readTextSetting(const Arg &a, const SettingSpec &spec,
                       llvm::StringMap<Local> &env, Node &n, StringRef callee);

  std::optional<Node> checkMethodCall(const Expr &call,
                                      llvm::StringMap<Local> &env);

  /// Checks that `v` is a tensor of kind `k`, projecting a record to its
  /// field named `name` or its only field of that kind.
  std::optional<Node::Input> expectTensor(const Value &v, const Expr &at,
                                          TensorKind k, StringRef name,
                                          StringRef callee);

  std::optional<Node> checkBuiltinCall(const Expr &call,
                                       llvm::StringMap<Local> &env);

  /// The sp of a placement fits the call (SemaPlace.cpp).
  mlir::LogicalResult checkSequenceParallel(const Annotation &an, const Node &n,
                                            const Placement &pl);
  void checkAnnotation(const Annotation &an, Node &n,
                       llvm::StringMap<Local> &env);

  Program &p;
  mlir::MLIRContext &ctx;
  FnChecker fns;
  bool failed = false;
  unsigned numErrors = 0;
  std::map<std::string, Symbol> symbols;
  /// Archs and hardware whose errors were reported: resolved again (a
  /// cluster or model naming one), they fail without repeating them.
  std::set<std::string> broken;
  /// `: hf("dir")` imports by declaration, read once (nullopt: reported).
  std::map<const EntityDecl *, std::optional<HfImport>> hfImports;
  /// The import the last gatherProps met on its chain, if any.
  const HfImport *gatheredHf = nullptr;

  /// A call of a function written in the language: binds its tensors and
  /// numbers, then instantiates its body for them.
  std::optional<Node> checkFnCall(const Expr &call, const ast::FnDecl &fn,
                                  llvm::StringMap<Local> &env);
  /// The arguments of `adaptive_kl(...)` or `adaptive_entropy(...)`, given
  /// for a function's number parameter.
  std::optional<FnControl> checkAdaptiveControl(const Expr &call,
                                                llvm::StringMap<Local> &env);

  const HfImport *hfImport(const EntityDecl &d);
  std::vector<std::string> symbolOrder;
  Instance *current = nullptr;
  const RunDecl *currentRun = nullptr;
  /// The gen_batch readGenBatch found for the current instance, else 0,
  /// for readFilterAnnotation to record in the filter.
  int64_t genBatch = 0;
  /// The algorithm body's names while a run types it, for evalScalar.
  llvm::StringMap<Local> *numberScope = nullptr;
};

} // namespace rlhfc::sema::detail

#endif // RLHFC_LIB_FRONTEND_SEMAIMPL_H
