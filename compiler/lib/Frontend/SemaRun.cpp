//===- SemaRun.cpp - runs: instantiating and typing the dataflow ----------===//

#include "SemaImpl.h"

#include "rlhfc/Support/SourcePaths.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SaveAndRestore.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

void Sema::checkAlgorithmNames(const AlgorithmDecl &a) {
  llvm::StringMap<mlir::Location> locals;
  static const std::vector<std::string> paramTypes = {"model", "dataset", "int",
                                                      "float"};
  for (const Param &prm : a.params) {
    if (!llvm::is_contained(paramTypes, prm.type))
      error(prm.typeLoc,
            formatv("unknown parameter type '{0}' (types are model, "
                    "dataset, int and float){1}",
                    prm.type, didYouMean(prm.type, paramTypes)));
    if (auto [it, ok] = locals.try_emplace(prm.name, prm.loc); !ok)
      error(prm.loc, "parameter '" + prm.name + "' is declared twice")
              .attachNote(it->second)
          << "first declared here";
  }
  if (a.body.empty())
    warning(a.loc, "algorithm '" + a.name +
                       "' has no statements; an iteration "
                       "would do nothing");
  for (const Stmt &s : a.body) {
    walkNames(*s.expr, locals);
    for (const Annotation &an : s.annotations)
      for (const Arg &arg : an.args)
        walkNames(*arg.value, locals);
    if (s.target.empty())
      continue;
    if (auto [it, ok] = locals.try_emplace(s.target, s.loc); !ok)
      error(s.loc, "'" + s.target +
                       "' is already defined; each name is "
                       "bound once per iteration")
              .attachNote(it->second)
          << "previous definition is here";
  }
}

void Sema::walkNames(const Expr &e,
                     const llvm::StringMap<mlir::Location> &locals) {
  switch (e.kind) {
  case Expr::Kind::Name:
    if (!locals.count(e.text) && !symbols.count(e.text)) {
      std::vector<std::string> cands = namesOfKind(std::nullopt);
      for (auto &kv : locals)
        cands.push_back(kv.getKey().str());
      error(e.loc, formatv("unknown name '{0}'{1}", e.text,
                           didYouMean(e.text, cands)));
    }
    return;
  case Expr::Kind::Call:
    if (e.base->kind == Expr::Kind::Name &&
        (fns.find(e.base->text) || isAdaptiveControl(e)) &&
        !locals.count(e.base->text)) {
      // a function written in the language, or adaptive_kl or
      // adaptive_entropy (checked where it is given)
    } else if (e.base->kind == Expr::Kind::Name) {
      if (!lookupBuiltin(e.base->text) &&
          (locals.count(e.base->text) || symbols.count(e.base->text))) {
        error(e.base->loc,
              "'" + e.base->text +
                  "' is not a function; call a function such as "
                  "'gae(...)' or a model method such as "
                  "'actor.generate(...)'");
      } else if (lookupFnPrimitive(e.base->text)) {
        error(e.base->loc, "'" + e.base->text +
                               "' works inside functions; "
                               "write an 'fn' that uses it and call that");
      } else if (!lookupBuiltin(e.base->text)) {
        std::vector<std::string> cands = builtinNames();
        for (const std::string &f : fns.names())
          cands.push_back(f);
        unknownFunction(e.base->loc, e.base->text,
                        didYouMean(e.base->text, cands));
      }
    } else {
      walkNames(*e.base, locals);
    }
    for (const Arg &a : e.args)
      walkNames(*a.value, locals);
    return;
  case Expr::Kind::Field:
  case Expr::Kind::Neg:
    walkNames(*e.base, locals);
    return;
  case Expr::Kind::Slice:
    walkNames(*e.base, locals);
    walkNames(*e.lo, locals);
    walkNames(*e.hi, locals);
    return;
  case Expr::Kind::Binary:
    walkNames(*e.base, locals);
    walkNames(*e.hi, locals);
    return;
  case Expr::Kind::List:
    for (auto &x : e.elems)
      walkNames(*x, locals);
    return;
  default:
    return;
  }
}

std::string Sema::describe(const Value &v) {
  switch (v.kind) {
  case Value::Model:
    return "model '" + v.model->name + "'";
  case Value::Dataset:
    return "dataset '" + v.dataset->name + "'";
  case Value::Cluster:
    return "cluster '" + v.cluster->name + "'";
  case Value::Number:
    return "a number";
  case Value::Record:
    return "record " + v.record.str();
  case Value::Tensor:
    return tensorKindNoun(v.tensor.kind).str() + " (" + v.tensor.str() + ")";
  default:
    return "nothing";
  }
}

void Sema::instantiate(const RunDecl &r) {
  auto it = p.algorithms.find(r.algorithm);
  if (it == p.algorithms.end()) {
    std::vector<std::string> cands;
    for (auto &kv : p.algorithms)
      cands.push_back(kv.first);
    error(r.loc, formatv("unknown algorithm '{0}'{1}", r.algorithm,
                         didYouMean(r.algorithm, cands)));
    return;
  }
  const AlgorithmDecl &alg = *it->second;
  Instance inst;
  inst.algorithm = alg.name;
  inst.loc = r.loc;

  // Run settings.
  PropMap m;
  for (const Property &prop : r.props) {
    if (!llvm::any_of(kRunProps,
                      [&](const PropSpec &s) { return prop.name == s.name; })) {
      std::vector<std::string> known;
      for (auto &s : kRunProps)
        known.push_back(s.name);
      error(prop.loc, formatv("unknown run setting '{0}'{1}", prop.name,
                              didYouMean(prop.name, known)));
      continue;
    }
    if (auto [i, ok] = m.try_emplace(prop.name, &prop); !ok)
      error(prop.loc, "run setting '" + prop.name + "' is set twice")
              .attachNote(i->second->loc)
          << "first set here";
  }
  if (!m.count("steps"))
    error(r.loc, "run of '" + alg.name +
                     "' is missing 'steps'; add "
                     "'steps = N;' to its block");
  setInt(m, "steps", inst.settings.steps, 1, mlir::rlhf::kMaxSteps);
  setInt(m, "seed", inst.settings.seed, 0, mlir::rlhf::kMaxSteps);
  setInt(m, "save_interval", inst.settings.saveInterval, 0,
         mlir::rlhf::kMaxSteps);
  setInt(m, "staleness", inst.settings.staleness, 0, mlir::rlhf::kMaxStaleness);
  readEval(m, inst);
  if (auto *c = m.lookup("cluster"); c && checkHasValue(*c)) {
    if (auto name = evalName(*c->value, "'cluster'"))
      if (lookupEntity(*name, EntityKind::Cluster, c->value->loc, "cluster"))
        if (auto ci = p.clusters.find(*name); ci != p.clusters.end())
          inst.cluster = &ci->second;
  } else if (p.clusters.size() == 1) {
    inst.cluster = &p.clusters.begin()->second;
  } else if (p.clusters.empty()) {
    if (!llvm::any_of(symbols, [](auto &kv) {
          return kv.second.kind == Symbol::Entity &&
                 kv.second.entity->kind == EntityKind::Cluster;
        }))
      error(r.loc, "no cluster is declared; add one such as 'cluster c : "
                   "H100_SXM { nodes = 1; gpus_per_node = 8; }'");
  } else {
    error(r.loc, "several clusters are declared; choose one with "
                 "'cluster = NAME;' in the run block");
  }

  // Too few arguments: binding them by position would report the first
  // argument that lands on a parameter of another kind, not the count.
  if (r.args.size() < alg.params.size()) {
    std::string sig;
    for (const Param &prm : alg.params)
      sig += (sig.empty() ? "" : ", ") + prm.name + ": " + prm.type;
    error(r.loc, formatv("'{0}' takes {1} arguments ({2}), but {3} {4} given",
                         alg.name, alg.params.size(), sig, r.args.size(),
                         r.args.size() == 1 ? "is" : "are"))
            .attachNote(alg.loc)
        << "'" << alg.name << "' is declared here";
    return;
  }

  // Bind parameters.
  unsigned errorsBeforeArgs = numErrors;
  llvm::StringMap<Local> env;
  size_t positional = 0;
  bool namedSeen = false;
  std::vector<bool> bound(alg.params.size(), false);
  for (const Arg &a : r.args) {
    size_t idx;
    if (a.name.empty()) {
      if (namedSeen) {
        error(a.loc, "positional argument after a named one");
        continue;
      }
      idx = positional++;
      if (idx >= alg.params.size()) {
        error(a.loc, formatv("'{0}' takes {1} argument{2}, but more are given",
                             alg.name, alg.params.size(),
                             alg.params.size() == 1 ? "" : "s"))
                .attachNote(alg.loc)
            << "'" << alg.name << "' is declared here";
        continue;
      }
    } else {
      namedSeen = true;
      auto pit = llvm::find_if(
          alg.params, [&](const Param &x) { return x.name == a.name; });
      if (pit == alg.params.end()) {
        std::vector<std::string> names;
        for (auto &x : alg.params)
          names.push_back(x.name);
        error(a.loc, formatv("'{0}' has no parameter '{1}'{2}", alg.name,
                             a.name, didYouMean(a.name, names)));
        continue;
      }
      idx = pit - alg.params.begin();
    }
    const Param &prm = alg.params[idx];
    if (bound[idx]) {
      error(a.loc, "parameter '" + prm.name + "' is given twice");
      continue;
    }
    bound[idx] = true;
    if (auto v = bindParam(prm, *a.value))
      env.try_emplace(prm.name, Local{*v, prm.loc, true});
  }
  bool argErrors = numErrors != errorsBeforeArgs; // don't cascade
  for (size_t i = 0; i < alg.params.size() && !argErrors; ++i)
    if (!bound[i])
      error(r.loc, "missing argument for parameter '" + alg.params[i].name +
                       "' of '" + alg.name + "'")
              .attachNote(alg.params[i].loc)
          << "parameter declared here";
  if (failed)
    return;

  // One model for two of the algorithm's models (a reference that is the
  // policy) is legal but seldom meant.
  llvm::DenseMap<const Model *, StringRef> firstParam;
  for (const Param &prm : alg.params)
    if (auto bound = env.find(prm.name);
        bound != env.end() && bound->second.value.kind == Value::Model) {
      auto [it, fresh] =
          firstParam.try_emplace(bound->second.value.model, prm.name);
      if (!fresh)
        warning(r.loc,
                formatv("model '{0}' is passed as both '{1}' and '{2}' of "
                        "'{3}', so they are one set of weights (a reference "
                        "that moves with the policy, say); pass two models "
                        "unless that is meant",
                        bound->second.value.model->name, it->second, prm.name,
                        alg.name));
    }
  for (const Param &prm : alg.params) {
    auto bound = env.find(prm.name);
    if (bound == env.end()) // its declaration failed and said why
      return;
    const Value &v = bound->second.value;
    if (v.kind == Value::Model)
      inst.models.push_back(v.model);
    if (v.kind == Value::Dataset)
      inst.dataset = v.dataset;
    if (v.kind == Value::Number)
      inst.numbers[prm.name] = v.number;
  }
  current = &inst;
  currentRun = &r;
  {
    llvm::SaveAndRestore<llvm::StringMap<Local> *> scope(numberScope, &env);
    readGenBatch(alg, env);
    for (const Stmt &s : alg.body)
      checkStmt(s, env);
  }
  checkOffloads(inst);
  checkTokenizers(inst);
  checkStaleness(inst);
  checkGroups(inst);
  checkFilter(inst);
  checkSchedules(inst);
  checkEval(inst);
  // Unused results, in source order.
  std::vector<const Local *> unused;
  for (auto &kv : env)
    if (!kv.second.used)
      unused.push_back(&kv.second);
  llvm::sort(unused, [](const Local *a, const Local *b) {
    auto la = mlir::cast<mlir::FileLineColLoc>(a->loc);
    auto lb = mlir::cast<mlir::FileLineColLoc>(b->loc);
    return std::make_pair(la.getLine(), la.getColumn()) <
           std::make_pair(lb.getLine(), lb.getColumn());
  });
  for (const Local *l : unused)
    for (auto &kv : env)
      if (&kv.second == l)
        warning(l->loc, "result '" + kv.getKey().str() +
                            "' is never used; remove it or pass it on");
  current = nullptr;
  if (!failed)
    p.instances.push_back(std::move(inst));
}

/// The file a model's tokenizer names, resolved like every path of the
/// program: a directory (an hf import) stands for its tokenizer.json.
static std::string tokenizerFile(const Model &m) {
  llvm::SmallString<256> f(resolveFrom(m.tokenizerLoc, m.tokenizer));
  if (llvm::sys::fs::is_directory(f))
    llvm::sys::path::append(f, "tokenizer.json");
  return f.str().str();
}

/// Whether two models tokenize alike: the same file, or files with the same
/// bytes (two checkpoints of one family each carry a copy). Unreadable
/// files compare by path; the runtime reports them.
static bool sameTokenizer(const Model &a, const Model &b) {
  if (a.tokenizer == b.tokenizer)
    return true;
  std::string fa = tokenizerFile(a), fb = tokenizerFile(b);
  if (fa == fb)
    return true;
  auto ba = llvm::MemoryBuffer::getFile(fa);
  auto bb = llvm::MemoryBuffer::getFile(fb);
  return ba && bb && (*ba)->getBuffer() == (*bb)->getBuffer();
}

void Sema::checkTokenizers(const Instance &inst) {
  const Model *first = nullptr;
  for (const Model *m : inst.models) {
    if (m->tokenizer.empty())
      continue;
    if (!first) {
      first = m;
      continue;
    }
    if (!sameTokenizer(*m, *first))
      error(m->tokenizerLoc,
            formatv("'{0}' uses tokenizer \"{1}\" but '{2}' uses \"{3}\", "
                    "and they differ; the models of a run share one "
                    "tokenizer",
                    m->name, m->tokenizer, first->name, first->tokenizer))
              .attachNote(first->tokenizerLoc)
          << "'" << first->name << "' names its tokenizer here";
  }
}

void Sema::checkOffloads(const Instance &inst) {
  for (const Node &n : inst.nodes) {
    if (!n.placement || !n.placement->offload)
      continue;
    int calls = 0;
    bool averaged = false;
    for (const Node &o : inst.nodes) {
      if (o.model != n.model)
        continue;
      if (o.kind == Node::Kind::Ema)
        averaged = true;
      else if (o.kind != Node::Kind::Host)
        ++calls;
    }
    if (calls > 1)
      error(n.placement->offloadLoc,
            formatv("'{0}' has {1} calls and cannot be offloaded; only a "
                    "frozen model with one call rests in host memory",
                    n.model->name, calls));
    else if (averaged)
      error(n.placement->offloadLoc,
            formatv("'{0}' is updated by 'ema' and cannot be offloaded; its "
                    "host copy would go stale",
                    n.model->name));
  }
}

std::optional<Sema::Value> Sema::bindParam(const Param &prm, const Expr &arg) {
  Value v;
  if (prm.type == "int" || prm.type == "float") {
    auto s = evalScalar(arg);
    if (!s)
      return std::nullopt;
    if (s->dim != UnitDim::None) {
      error(arg.loc, "parameter '" + prm.name + "' is a plain " + prm.type +
                         ", not " + unitDimName(s->dim).str());
      return std::nullopt;
    }
    if (prm.type == "int" && !s->isInteger) {
      error(arg.loc, "parameter '" + prm.name + "' is an int");
      return std::nullopt;
    }
    v.kind = Value::Number;
    v.number = s->value;
    v.isInteger = prm.type == "int";
    return v;
  }
  if (arg.kind != Expr::Kind::Name) {
    error(arg.loc,
          "parameter '" + prm.name + "' takes a " + prm.type + " name");
    return std::nullopt;
  }
  if (prm.type == "model") {
    if (!lookupEntity(arg.text, EntityKind::Model, arg.loc, "model"))
      return std::nullopt;
    auto it = p.models.find(arg.text);
    if (it == p.models.end())
      return std::nullopt;
    v.kind = Value::Model;
    v.model = &it->second;
    v.defLoc = it->second.loc;
    return v;
  }
  if (prm.type == "dataset") {
    if (!lookupEntity(arg.text, EntityKind::Dataset, arg.loc, "dataset"))
      return std::nullopt;
    auto it = p.datasets.find(arg.text);
    if (it == p.datasets.end())
      return std::nullopt;
    v.kind = Value::Dataset;
    v.dataset = &it->second;
    v.record = it->second.type;
    v.origin = prm.name;
    v.defLoc = it->second.loc;
    return v;
  }
  return std::nullopt;
}
