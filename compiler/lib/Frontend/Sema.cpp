//===- Sema.cpp - name resolution, presets and dataflow typing ------------===//

#include "rlhfc/Frontend/Sema.h"
#include "FnCheck.h"
#include "HfImport.h"
#include "rlhfc/Frontend/Builtins.h"
#include "rlhfc/Frontend/Units.h"

#include "mlir/IR/Diagnostics.h"
#include "rlhf/IR/RLHFOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <functional>
#include <set>
#include <tuple>

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::ast;
using llvm::formatv;
using llvm::StringRef;

rlhf::ModelShape Arch::shape(bool valueHead) const {
  rlhf::ModelShape s{layers, hidden, heads, kvHeads, ffn, vocab,
                     tieEmbeddings, valueHead};
  s.qkvBias = qkvBias;
  return s;
}

int64_t Arch::paramCount(bool valueHead) const {
  return rlhf::parameterCount(shape(valueHead));
}

double Node::attr(StringRef key, double fallback) const {
  for (auto &kv : attrs)
    if (kv.first == key)
      return kv.second;
  return fallback;
}

StringRef sema::nodeKindName(Node::Kind k) {
  switch (k) {
  case Node::Kind::Generate: return "generate";
  case Node::Kind::Inference: return "inference";
  case Node::Kind::Train: return "train";
  case Node::Kind::Host: return "host";
  case Node::Kind::Ema: return "ema";
  }
  return "?";
}

namespace {

/// The head whose outputs an fn loss reads.
Head fnHead(const FnBody &b) {
  for (const FnOp &o : b.ops)
    if (o.op == "values" || o.op == "score")
      return Head::Value;
  return Head::LM;
}

/// The closest candidate within edit distance 2, for "did you mean".
std::string closest(StringRef word, llvm::ArrayRef<std::string> candidates) {
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
std::string withArticle(StringRef noun) {
  bool vowel = !noun.empty() && StringRef("aeiou").contains(noun.front());
  return (vowel ? "an " : "a ") + noun.str();
}

std::string didYouMean(StringRef word, llvm::ArrayRef<std::string> candidates) {
  std::string c = closest(word, candidates);
  return c.empty() ? "" : "; did you mean '" + c + "'?";
}

enum class PropType { Int, Float, Bytes, Bandwidth, Flops, String, Flag, Name, Call, NameList };

struct PropSpec {
  const char *name;
  PropType type;
  bool required;
};

// Property schemas of each declaration kind. Keep lang/README.md in sync.
const PropSpec kHardwareProps[] = {
    {"bf16_flops", PropType::Flops, true},
    {"hbm", PropType::Bytes, true},
    {"hbm_bandwidth", PropType::Bandwidth, true},
    {"nvlink_bandwidth", PropType::Bandwidth, true},
    {"network_bandwidth", PropType::Bandwidth, true},
    {"host_bandwidth", PropType::Bandwidth, false},
};
const PropSpec kArchProps[] = {
    {"layers", PropType::Int, true},   {"hidden", PropType::Int, true},
    {"heads", PropType::Int, true},    {"kv_heads", PropType::Int, false},
    {"ffn", PropType::Int, true},      {"vocab", PropType::Int, true},
    {"max_seq", PropType::Int, false}, {"tie_embeddings", PropType::Flag, false},
};
const PropSpec kModelOnlyProps[] = {
    {"trainable", PropType::Flag, false},
    {"frozen", PropType::Flag, false},
    {"head", PropType::Name, false},
    {"optimizer", PropType::Call, false},
    {"checkpoint", PropType::String, false},
    {"tokenizer", PropType::String, false},
};
const PropSpec kClusterProps[] = {
    {"nodes", PropType::Int, true},
    {"gpus_per_node", PropType::Int, true},
};
const PropSpec kDatasetProps[] = {
    {"path", PropType::String, true},
    {"batch", PropType::Int, true},
    {"max_prompt_len", PropType::Int, true},
    {"max_response_len", PropType::Int, false},
    {"fields", PropType::NameList, true},
};
const PropSpec kRunProps[] = {
    {"steps", PropType::Int, true},
    {"seed", PropType::Int, false},
    {"save_interval", PropType::Int, false},
    {"cluster", PropType::Name, false},
};

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

  mlir::LogicalResult run() {
    collectSymbols();
    for (const std::string &name : symbolOrder)
      resolveEntity(name);
    for (auto &m : p.modules)
      for (auto &a : m->algorithms)
        checkAlgorithmNames(*a);
    fns.checkAll();
    for (auto &m : p.modules)
      for (auto &r : m->runs)
        if (m.get() == p.modules.front().get())
          instantiate(*r);
        else
          error(r->loc, "'run' is only allowed in the main file, not in an "
                        "imported one; move it to the file you compile");
    return mlir::failure(failed);
  }

private:
  // ---- diagnostics -------------------------------------------------------
  mlir::InFlightDiagnostic error(mlir::Location loc, const llvm::Twine &msg) {
    failed = true;
    ++numErrors;
    return mlir::emitError(loc, msg);
  }
  void warning(mlir::Location loc, const llvm::Twine &msg) {
    mlir::emitWarning(loc, msg);
  }

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

  void collectSymbols() {
    auto add = [&](const std::string &name, Symbol s) {
      auto [it, inserted] = symbols.emplace(name, s);
      if (!inserted) {
        error(s.loc, formatv("{0} '{1}' is already declared", s.kindName(), name))
                .attachNote(it->second.loc)
            << "previous declaration of '" << name << "' ("
            << withArticle(it->second.kindName()) << ") is here";
        return;
      }
      symbolOrder.push_back(name);
    };
    // Imported modules first: a name that clashes with an import is then
    // reported in the file that redeclares it, not in the library.
    std::vector<ast::Module *> order;
    for (size_t i = 1; i < p.modules.size(); ++i)
      order.push_back(p.modules[i].get());
    if (!p.modules.empty())
      order.push_back(p.modules.front().get());
    for (ast::Module *m : order) {
      for (auto &e : m->entities)
        add(e->name, Symbol{Symbol::Entity, e.get(), nullptr, e->loc});
      for (auto &a : m->algorithms) {
        add(a->name, Symbol{Symbol::Algorithm, nullptr, a.get(), a->loc});
        p.algorithms[a->name] = a.get();
      }
      for (auto &f : m->functions) {
        add(f->name, Symbol{Symbol::Function, nullptr, nullptr, f->loc});
        if (!p.functions.count(f->name)) {
          p.functions[f->name] = f.get();
          fns.add(*f);
        }
      }
    }
  }

  std::vector<std::string> namesOfKind(std::optional<EntityKind> k) {
    std::vector<std::string> out;
    for (auto &[n, s] : symbols)
      if (!k || (s.kind == Symbol::Entity && s.entity->kind == *k))
        out.push_back(n);
    return out;
  }

  /// Looks up `name` as an entity of kind `k`, with a located error naming
  /// what was found instead.
  const EntityDecl *lookupEntity(StringRef name, EntityKind k, mlir::Location use,
                                 StringRef role) {
    auto it = symbols.find(name.str());
    if (it == symbols.end()) {
      error(use, formatv("unknown {0} '{1}'{2}", role, name,
                         didYouMean(name, namesOfKind(k))));
      return nullptr;
    }
    if (it->second.kind != Symbol::Entity || it->second.entity->kind != k) {
      error(use, formatv("'{0}' is {1}, but {2} is needed here", name,
                         withArticle(it->second.kindName()), withArticle(role)))
              .attachNote(it->second.loc)
          << "'" << name << "' is declared here";
      return nullptr;
    }
    return it->second.entity;
  }

  // ---- properties --------------------------------------------------------
  using PropMap = llvm::StringMap<const Property *>;

  /// Gathers the properties of `d` and its bases (the derived ones win),
  /// rejecting unknown and duplicate names.
  bool gatherProps(const EntityDecl &d, llvm::ArrayRef<PropSpec> specs,
                   PropMap &out, std::vector<const EntityDecl *> &chain) {
    if (llvm::is_contained(chain, &d)) {
      auto diag = error(d.loc, formatv("{0} '{1}' derives from itself",
                                       entityKindName(d.kind), d.name));
      for (auto *c : chain)
        diag.attachNote(c->baseLoc) << "'" << c->name << "' derives from '"
                                    << c->base << "' here";
      return false;
    }
    chain.push_back(&d);
    bool ok = true;
    if (d.basePath) {
      if (d.base != "hf") {
        error(d.baseLoc,
              formatv("'{0}(...)' is not a base; write ': hf(\"dir\")' to "
                      "import a Hugging Face checkpoint, or ': {0}' for a preset",
                      d.base));
        ok = false;
      } else if (d.kind != EntityKind::Arch && d.kind != EntityKind::Model) {
        error(d.baseLoc, formatv("a {0} cannot import a checkpoint; only an "
                                 "arch or a model has ': hf(\"dir\")'",
                                 entityKindName(d.kind)));
        ok = false;
      } else if (const HfImport *h = hfImport(d)) {
        gatheredHf = h;
      } else {
        ok = false;
      }
    } else if (!d.base.empty()) {
      EntityKind baseKind = d.kind == EntityKind::Model     ? EntityKind::Arch
                            : d.kind == EntityKind::Cluster ? EntityKind::Hardware
                                                            : d.kind;
      if (d.kind == EntityKind::Dataset) {
        error(d.baseLoc, "a dataset has no base; remove ': " + d.base + "'");
        ok = false;
      } else if (auto *b = lookupEntity(d.base, baseKind, d.baseLoc,
                                        entityKindName(baseKind).str() +
                                            " preset")) {
        llvm::ArrayRef<PropSpec> baseSpecs = specs;
        if (d.kind == EntityKind::Model)
          baseSpecs = kArchProps;
        if (d.kind == EntityKind::Cluster)
          baseSpecs = {}; // hardware is referenced, not merged
        if (!baseSpecs.empty())
          ok &= gatherProps(*b, baseSpecs, out, chain);
      } else {
        ok = false;
      }
    }
    llvm::StringMap<const Property *> mine;
    std::vector<std::string> known;
    for (auto &s : specs)
      known.push_back(s.name);
    for (const Property &prop : d.props) {
      if (!llvm::any_of(specs, [&](const PropSpec &s) { return prop.name == s.name; })) {
        error(prop.loc, formatv("unknown property '{0}' in {1} '{2}'{3}", prop.name,
                                entityKindName(d.kind), d.name,
                                didYouMean(prop.name, known)));
        ok = false;
        continue;
      }
      auto [it, inserted] = mine.try_emplace(prop.name, &prop);
      if (!inserted) {
        error(prop.loc, formatv("property '{0}' is set twice", prop.name))
                .attachNote(it->second->loc)
            << "first set here";
        ok = false;
        continue;
      }
      out[prop.name] = &prop;
    }
    chain.pop_back();
    return ok;
  }

  bool checkRequired(const EntityDecl &d, llvm::ArrayRef<PropSpec> specs,
                     const PropMap &props) {
    std::vector<std::string> missing;
    for (auto &s : specs)
      if (s.required && !props.count(s.name))
        missing.push_back(s.name);
    if (missing.empty())
      return true;
    std::string list;
    for (auto &m : missing)
      list += (list.empty() ? "'" : ", '") + m + "'";
    error(d.loc, formatv("{0} '{1}' is missing {2} {3}", entityKindName(d.kind),
                         d.name, missing.size() == 1 ? "property" : "properties",
                         list));
    return false;
  }

  // ---- constant expressions ----------------------------------------------
  std::optional<Scalar> evalScalar(const Expr &e) {
    switch (e.kind) {
    case Expr::Kind::Number: {
      Scalar s{e.number, e.isInteger, UnitDim::None};
      if (!e.text.empty()) {
        const Unit *u = lookupUnit(e.text);
        if (!u) {
          error(e.loc, formatv("unknown unit '{0}'; known units: {1}", e.text,
                               knownUnitList()));
          return std::nullopt;
        }
        s.value *= u->factor;
        s.dim = u->dim;
        s.isInteger = s.isInteger && u->factor == std::floor(u->factor);
      }
      return s;
    }
    case Expr::Kind::Neg: {
      auto v = evalScalar(*e.base);
      if (v)
        v->value = -v->value;
      return v;
    }
    case Expr::Kind::Binary: {
      if (e.text != "+" && e.text != "-" && e.text != "*" && e.text != "/") {
        error(e.loc, "a comparison gives a mask, which only a function ('fn') "
                     "can compute with; a setting needs a number");
        return std::nullopt;
      }
      auto l = evalScalar(*e.base), r = evalScalar(*e.hi);
      if (!l || !r)
        return std::nullopt;
      Scalar s;
      s.isInteger = l->isInteger && r->isInteger;
      if (e.text == "+" || e.text == "-") {
        if (l->dim != r->dim) {
          error(e.loc, formatv("cannot {0} {1} and {2}",
                               e.text == "+" ? "add" : "subtract",
                               unitDimName(l->dim), unitDimName(r->dim)));
          return std::nullopt;
        }
        s.dim = l->dim;
        s.value = e.text == "+" ? l->value + r->value : l->value - r->value;
        return s;
      }
      if (l->dim != UnitDim::None && r->dim != UnitDim::None) {
        error(e.loc, "only one side of '" + e.text + "' may carry a unit");
        return std::nullopt;
      }
      s.dim = l->dim != UnitDim::None ? l->dim : r->dim;
      if (e.text == "*") {
        s.value = l->value * r->value;
      } else {
        if (r->value == 0) {
          error(e.loc, "division by zero");
          return std::nullopt;
        }
        s.value = l->value / r->value;
        s.isInteger = s.isInteger && std::fmod(l->value, r->value) == 0;
      }
      return s;
    }
    default:
      error(e.loc, "expected a number");
      return std::nullopt;
    }
  }

  std::optional<double> evalNumber(const Expr &e, UnitDim dim, StringRef what) {
    auto s = evalScalar(e);
    if (!s)
      return std::nullopt;
    if (s->dim != UnitDim::None && s->dim != dim) {
      error(e.loc, formatv("{0} expects {1}, but this is {2}", what,
                           unitDimName(dim), unitDimName(s->dim)));
      return std::nullopt;
    }
    if (!std::isfinite(s->value)) {
      error(e.loc, formatv("{0} is not a finite number", what));
      return std::nullopt;
    }
    return s->value;
  }

  /// A positive integer within [lo, hi].
  std::optional<int64_t> evalInt(const Expr &e, StringRef what, int64_t lo = 1,
                                 int64_t hi = int64_t(1) << 40) {
    auto s = evalScalar(e);
    if (!s)
      return std::nullopt;
    if (s->dim != UnitDim::None) {
      error(e.loc, formatv("{0} must be a plain integer, not {1}", what,
                           unitDimName(s->dim)));
      return std::nullopt;
    }
    if (!s->isInteger || s->value != std::floor(s->value)) {
      error(e.loc, formatv("{0} must be an integer", what));
      return std::nullopt;
    }
    if (s->value < double(lo) || s->value > double(hi)) {
      error(e.loc, formatv("{0} must be between {1} and {2}, got {3}", what, lo,
                           hi, formatNumber(s->value)));
      return std::nullopt;
    }
    return int64_t(s->value);
  }

  std::optional<std::string> evalString(const Expr &e, StringRef what) {
    if (e.kind != Expr::Kind::String) {
      error(e.loc, formatv("{0} must be a string in double quotes", what));
      return std::nullopt;
    }
    return e.text;
  }

  std::optional<std::string> evalName(const Expr &e, StringRef what) {
    if (e.kind != Expr::Kind::Name) {
      error(e.loc, formatv("{0} must be a name", what));
      return std::nullopt;
    }
    return e.text;
  }

  template <typename T>
  void setInt(const PropMap &m, StringRef key, T &dst, int64_t lo = 1,
              int64_t hi = int64_t(1) << 40) {
    if (auto *prop = m.lookup(key))
      if (checkHasValue(*prop))
        if (auto v = evalInt(*prop->value, "'" + key.str() + "'", lo, hi))
          dst = *v;
  }
  void setNum(const PropMap &m, StringRef key, UnitDim dim, double &dst) {
    if (auto *prop = m.lookup(key))
      if (checkHasValue(*prop))
        if (auto v = evalNumber(*prop->value, dim, "'" + key.str() + "'")) {
          if (*v <= 0)
            error(prop->value->loc, "'" + key + "' must be positive");
          dst = *v;
        }
  }
  bool flag(const PropMap &m, StringRef key) {
    auto *prop = m.lookup(key);
    if (!prop)
      return false;
    if (prop->value) {
      if (prop->value->kind == Expr::Kind::Bool)
        return prop->value->boolean;
      error(prop->value->loc, "'" + key + "' is a flag: write '" + key +
                                  ";' or '" + key + " = true;'");
    }
    return true;
  }
  bool checkHasValue(const Property &prop) {
    if (prop.value)
      return true;
    error(prop.loc, "'" + prop.name + "' needs a value: write '" + prop.name +
                        " = ...;'");
    return false;
  }

  // ---- entities ----------------------------------------------------------
  void resolveEntity(const std::string &name) {
    Symbol &s = symbols.at(name);
    if (s.kind != Symbol::Entity)
      return;
    const EntityDecl &d = *s.entity;
    switch (d.kind) {
    case EntityKind::Hardware: resolveHardware(d); break;
    case EntityKind::Arch: resolveArch(d); break;
    case EntityKind::Cluster: resolveCluster(d); break;
    case EntityKind::Model: resolveModel(d); break;
    case EntityKind::Dataset: resolveDataset(d); break;
    }
  }

  const Hardware *resolveHardware(const EntityDecl &d) {
    if (auto it = p.hardware.find(d.name); it != p.hardware.end())
      return &it->second;
    PropMap m;
    std::vector<const EntityDecl *> chain;
    if (!gatherProps(d, kHardwareProps, m, chain) || !checkRequired(d, kHardwareProps, m))
      return nullptr;
    Hardware h;
    h.name = d.name;
    h.loc = d.loc;
    setNum(m, "bf16_flops", UnitDim::Flops, h.bf16Flops);
    setNum(m, "hbm", UnitDim::Bytes, h.hbmBytes);
    setNum(m, "hbm_bandwidth", UnitDim::Bandwidth, h.hbmBandwidth);
    setNum(m, "nvlink_bandwidth", UnitDim::Bandwidth, h.nvlinkBandwidth);
    setNum(m, "network_bandwidth", UnitDim::Bandwidth, h.networkBandwidth);
    setNum(m, "host_bandwidth", UnitDim::Bandwidth, h.hostBandwidth);
    return &(p.hardware[d.name] = h);
  }

  bool fillArch(const EntityDecl &d, const PropMap &m, Arch &a) {
    if (gatheredHf) // the checkpoint's, then the declaration's properties
      applyHf(*gatheredHf, a);
    a.name = d.name;
    a.loc = d.loc;
    setInt(m, "layers", a.layers, 1, 1024);
    setInt(m, "hidden", a.hidden, 1, 1 << 20);
    setInt(m, "heads", a.heads, 1, 4096);
    if (!gatheredHf || m.lookup("heads"))
      a.kvHeads = a.heads;
    setInt(m, "kv_heads", a.kvHeads, 1, 4096);
    setInt(m, "ffn", a.ffn, 1, 1 << 22);
    setInt(m, "vocab", a.vocab, 1, 1 << 24);
    setInt(m, "max_seq", a.maxSeq, 1, 1 << 24);
    if (!gatheredHf || m.lookup("tie_embeddings"))
      a.tieEmbeddings = flag(m, "tie_embeddings");
    bool ok = true;
    if (a.heads && a.hidden % a.heads) {
      error(m.lookup("heads")->loc,
            formatv("hidden size {0} is not divisible by {1} heads", a.hidden, a.heads));
      ok = false;
    }
    if (a.kvHeads && a.heads % a.kvHeads) {
      auto *kv = m.lookup("kv_heads");
      error(kv ? kv->loc : d.loc,
            formatv("{0} heads are not divisible by {1} kv_heads; grouped-query "
                    "attention needs heads to be a multiple of kv_heads",
                    a.heads, a.kvHeads));
      ok = false;
    }
    return ok;
  }

  const Arch *resolveArch(const EntityDecl &d) {
    if (auto it = p.archs.find(d.name); it != p.archs.end())
      return &it->second;
    if (!brokenArchs.insert(d.name).second)
      return nullptr; // already reported
    PropMap m;
    std::vector<const EntityDecl *> chain;
    gatheredHf = nullptr;
    if (!gatherProps(d, kArchProps, m, chain) ||
        (!gatheredHf && !checkRequired(d, kArchProps, m)))
      return nullptr;
    Arch a;
    if (!fillArch(d, m, a))
      return nullptr;
    if (d.basePath)
      a.name = d.name;
    brokenArchs.erase(d.name);
    return &(p.archs[d.name] = a);
  }

  void resolveCluster(const EntityDecl &d) {
    PropMap m;
    std::vector<const EntityDecl *> chain;
    if (d.base.empty()) {
      error(d.loc, formatv("cluster '{0}' needs a hardware preset: write "
                           "'cluster {0} : H100_SXM {{ ... }'",
                           d.name));
      return;
    }
    if (!gatherProps(d, kClusterProps, m, chain) || !checkRequired(d, kClusterProps, m))
      return;
    const EntityDecl *hw = lookupEntity(d.base, EntityKind::Hardware, d.baseLoc,
                                        "hardware preset");
    Cluster c;
    c.name = d.name;
    c.loc = d.loc;
    c.hardware = hw ? resolveHardware(*hw) : nullptr;
    setInt(m, "nodes", c.nodes, 1, 1 << 16);
    setInt(m, "gpus_per_node", c.gpusPerNode, 1, 64);
    if (c.hardware)
      p.clusters[d.name] = c;
  }

  void resolveModel(const EntityDecl &d) {
    PropMap m;
    std::vector<const EntityDecl *> chain;
    std::vector<PropSpec> specs(std::begin(kArchProps), std::end(kArchProps));
    specs.insert(specs.end(), std::begin(kModelOnlyProps), std::end(kModelOnlyProps));
    gatheredHf = nullptr;
    if (!gatherProps(d, specs, m, chain))
      return;
    if (d.base.empty() && !checkRequired(d, kArchProps, m)) {
      mlir::emitRemark(d.loc) << "or base the model on an architecture "
                                 "preset: 'model "
                              << d.name << " : llama2_7b { ... }'";
      return;
    }
    Model model;
    model.name = d.name;
    model.loc = d.loc;
    if (!fillArch(d, m, model.arch))
      return;
    model.arch.name = d.base.empty() ? d.name
                      : d.basePath   ? gatheredHf->name
                                     : d.base;
    // An imported checkpoint brings its weights, and its tokenizer where it
    // has one, unless the model names others.
    if (gatheredHf && !m.lookup("checkpoint"))
      model.checkpoint = gatheredHf->dir;
    if (gatheredHf && gatheredHf->hasTokenizer && !m.lookup("tokenizer")) {
      model.tokenizer = gatheredHf->dir;
      model.tokenizerLoc = d.basePath ? d.basePathLoc : d.baseLoc;
    }
    bool trainable = flag(m, "trainable"), frozen = flag(m, "frozen");
    if (trainable && frozen)
      error(m.lookup("frozen")->loc, "a model cannot be both 'trainable' and 'frozen'");
    model.trainable = trainable;
    if (auto *h = m.lookup("head"); h && checkHasValue(*h)) {
      if (auto name = evalName(*h->value, "'head'")) {
        if (*name == "lm")
          model.head = Head::LM;
        else if (*name == "value")
          model.head = Head::Value;
        else
          error(h->value->loc, "unknown head '" + *name +
                                   "'; use 'head = lm;' or 'head = value;'");
      }
    }
    if (auto *o = m.lookup("optimizer"); o && checkHasValue(*o))
      parseOptimizer(*o->value, model.optimizer);
    if (auto *c = m.lookup("checkpoint"); c && checkHasValue(*c))
      if (auto s = evalString(*c->value, "'checkpoint'"))
        model.checkpoint = *s;
    if (auto *t = m.lookup("tokenizer"); t && checkHasValue(*t))
      if (auto s = evalString(*t->value, "'tokenizer'")) {
        if (s->empty())
          error(t->value->loc, "'tokenizer' names a sentencepiece .model file or a "
                               "Hugging Face tokenizer.json; "
                               "remove it to use the datasets' characters");
        model.tokenizer = *s;
        model.tokenizerLoc = t->loc;
      }
    if (m.lookup("optimizer") && !model.trainable)
      warning(m.lookup("optimizer")->loc,
              "optimizer settings on a model that is not 'trainable' are unused");
    p.models[d.name] = model;
  }

  void parseOptimizer(const Expr &e, Optimizer &o) {
    if (e.kind != Expr::Kind::Call || e.base->kind != Expr::Kind::Name) {
      error(e.loc, "optimizer must be a call such as 'adam(lr = 1e-6)'");
      return;
    }
    if (e.base->text != "adam" && e.base->text != "adamw") {
      error(e.base->loc, "unknown optimizer '" + e.base->text +
                             "'; supported: adam, adamw");
      return;
    }
    o.kind = e.base->text;
    static const std::vector<std::string> keys = {"lr", "beta1", "beta2", "eps",
                                                  "weight_decay", "grad_clip"};
    for (const Arg &a : e.args) {
      if (a.name.empty()) {
        error(a.loc, "optimizer settings are named: write 'lr = 1e-6'");
        continue;
      }
      double *dst = a.name == "lr"             ? &o.lr
                    : a.name == "beta1"        ? &o.beta1
                    : a.name == "beta2"        ? &o.beta2
                    : a.name == "eps"          ? &o.eps
                    : a.name == "weight_decay" ? &o.weightDecay
                    : a.name == "grad_clip"    ? &o.gradClip
                                               : nullptr;
      if (!dst) {
        error(a.loc, formatv("unknown optimizer setting '{0}'{1}", a.name,
                             didYouMean(a.name, keys)));
        continue;
      }
      if (auto v = evalNumber(*a.value, UnitDim::None, "'" + a.name + "'")) {
        if (*v < 0)
          error(a.value->loc, "'" + a.name + "' must not be negative");
        *dst = *v;
      }
    }
  }

  void resolveDataset(const EntityDecl &d) {
    PropMap m;
    std::vector<const EntityDecl *> chain;
    if (!gatherProps(d, kDatasetProps, m, chain) || !checkRequired(d, kDatasetProps, m))
      return;
    Dataset ds;
    ds.name = d.name;
    ds.loc = d.loc;
    if (auto *pp = m.lookup("path"); pp && checkHasValue(*pp))
      if (auto s = evalString(*pp->value, "'path'"))
        ds.path = *s;
    setInt(m, "batch", ds.batch, 1, 1 << 24);
    setInt(m, "max_prompt_len", ds.maxPromptLen, 1, 1 << 20);
    setInt(m, "max_response_len", ds.maxResponseLen, 0, 1 << 20);
    const Property *f = m.lookup("fields");
    if (!f || !checkHasValue(*f))
      return;
    if (f->value->kind != Expr::Kind::List || f->value->elems.empty()) {
      error(f->value->loc, "'fields' must be a list of field names, e.g. "
                           "'fields = [prompt, answer];'");
      return;
    }
    static const std::vector<std::string> roles = {"prompt", "answer", "chosen",
                                                   "rejected", "text"};
    std::set<std::string> seen;
    for (auto &el : f->value->elems) {
      if (el->kind != Expr::Kind::Name) {
        error(el->loc, "a dataset field is a name such as 'prompt'");
        continue;
      }
      if (!llvm::is_contained(roles, el->text)) {
        error(el->loc, formatv("unknown dataset field '{0}' (fields are "
                               "prompt, answer, chosen, rejected and text){1}",
                               el->text, didYouMean(el->text, roles)));
        continue;
      }
      if (!seen.insert(el->text).second) {
        error(el->loc, "dataset field '" + el->text + "' is listed twice");
        continue;
      }
      ds.fields.push_back(el->text);
      TensorType t{TensorKind::Tokens, DType::I32, {ds.batch, ds.maxPromptLen}};
      if (el->text == "answer") {
        t.kind = TensorKind::Answer;
        t.shape = {ds.batch, std::max<int64_t>(ds.maxResponseLen, 1)};
      } else if (el->text != "prompt") {
        t.shape = {ds.batch, ds.maxPromptLen + ds.maxResponseLen};
      }
      ds.type.fields.push_back(Field{el->text, t});
    }
    if ((seen.count("chosen") || seen.count("rejected")) && !ds.maxResponseLen)
      error(d.loc, "dataset '" + d.name + "' has preference pairs but no "
                   "'max_response_len'; set it to the longest response");
    p.datasets[d.name] = ds;
  }

  // ---- algorithms: names only (bodies are typed per run) ------------------
  void checkAlgorithmNames(const AlgorithmDecl &a) {
    llvm::StringMap<mlir::Location> locals;
    static const std::vector<std::string> paramTypes = {"model", "dataset", "int",
                                                        "float"};
    for (const Param &prm : a.params) {
      if (!llvm::is_contained(paramTypes, prm.type))
        error(prm.typeLoc, formatv("unknown parameter type '{0}' (types are model, "
                                   "dataset, int and float){1}",
                                   prm.type, didYouMean(prm.type, paramTypes)));
      if (auto [it, ok] = locals.try_emplace(prm.name, prm.loc); !ok)
        error(prm.loc, "parameter '" + prm.name + "' is declared twice")
                .attachNote(it->second)
            << "first declared here";
    }
    if (a.body.empty())
      warning(a.loc, "algorithm '" + a.name + "' has no statements; an iteration "
                     "would do nothing");
    for (const Stmt &s : a.body) {
      walkNames(*s.expr, locals);
      for (const Annotation &an : s.annotations)
        for (const Arg &arg : an.args)
          walkNames(*arg.value, locals);
      if (s.target.empty())
        continue;
      if (auto [it, ok] = locals.try_emplace(s.target, s.loc); !ok)
        error(s.loc, "'" + s.target + "' is already defined; each name is "
                     "bound once per iteration")
                .attachNote(it->second)
            << "previous definition is here";
    }
  }

  void walkNames(const Expr &e, const llvm::StringMap<mlir::Location> &locals) {
    switch (e.kind) {
    case Expr::Kind::Name:
      if (!locals.count(e.text) && !symbols.count(e.text)) {
        std::vector<std::string> cands = namesOfKind(std::nullopt);
        for (auto &kv : locals)
          cands.push_back(kv.getKey().str());
        error(e.loc, formatv("unknown name '{0}'{1}", e.text, didYouMean(e.text, cands)));
      }
      return;
    case Expr::Kind::Call:
      if (e.base->kind == Expr::Kind::Name && fns.find(e.base->text) &&
          !locals.count(e.base->text)) {
        // a function written in the language
      } else if (e.base->kind == Expr::Kind::Name) {
        if (!lookupBuiltin(e.base->text) &&
            (locals.count(e.base->text) || symbols.count(e.base->text))) {
          error(e.base->loc, "'" + e.base->text + "' is not a function; call a "
                             "built-in such as 'gae(...)' or a model method such "
                             "as 'actor.generate(...)'");
        } else if (lookupFnPrimitive(e.base->text)) {
          error(e.base->loc, "'" + e.base->text +
                                 "' works inside functions; "
                                 "write an 'fn' that uses it and call that");
        } else if (!lookupBuiltin(e.base->text)) {
          std::vector<std::string> cands = builtinNames();
          for (const std::string &f : fns.names())
            cands.push_back(f);
          error(e.base->loc, formatv("unknown function '{0}'{1}", e.base->text,
                                     didYouMean(e.base->text, cands)));
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

  // ---- runs: instantiate and type the dataflow ---------------------------
  /// What a name in an algorithm body stands for.
  struct Value {
    enum Kind { None, Poisoned, Model, Dataset, Cluster, Number, Record, Tensor } kind = None;
    const sema::Model *model = nullptr;
    const sema::Dataset *dataset = nullptr;
    const sema::Cluster *cluster = nullptr;
    double number = 0;
    bool isInteger = false;
    UnitDim dim = UnitDim::None;
    RecordType record;
    TensorType tensor;
    int producer = -1; ///< node index, -1 = dataset
    std::string field; ///< for tensors: the field of the producer
    std::string origin; ///< "g.seq", for messages
    mlir::LocationAttr defLoc;
  };

  struct Local {
    Value value;
    mlir::Location loc;
    bool used = false;
  };

  std::string describe(const Value &v) {
    switch (v.kind) {
    case Value::Model: return "model '" + v.model->name + "'";
    case Value::Dataset: return "dataset '" + v.dataset->name + "'";
    case Value::Cluster: return "cluster '" + v.cluster->name + "'";
    case Value::Number: return "a number";
    case Value::Record: return "record " + v.record.str();
    case Value::Tensor: return tensorKindNoun(v.tensor.kind).str() + " (" +
                               v.tensor.str() + ")";
    default: return "nothing";
    }
  }

  void instantiate(const RunDecl &r) {
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
      if (!llvm::any_of(kRunProps, [&](const PropSpec &s) { return prop.name == s.name; })) {
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
      error(r.loc, "run of '" + alg.name + "' is missing 'steps'; add "
                   "'steps = N;' to its block");
    setInt(m, "steps", inst.settings.steps, 1, int64_t(1) << 40);
    setInt(m, "seed", inst.settings.seed, 0, int64_t(1) << 40);
    setInt(m, "save_interval", inst.settings.saveInterval, 0, int64_t(1) << 40);
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
        auto pit = llvm::find_if(alg.params, [&](const Param &x) { return x.name == a.name; });
        if (pit == alg.params.end()) {
          std::vector<std::string> names;
          for (auto &x : alg.params)
            names.push_back(x.name);
          error(a.loc, formatv("'{0}' has no parameter '{1}'{2}", alg.name, a.name,
                               didYouMean(a.name, names)));
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

    for (const Param &prm : alg.params) {
      const Value &v = env.find(prm.name)->second.value;
      if (v.kind == Value::Model)
        inst.models.push_back(v.model);
      if (v.kind == Value::Dataset)
        inst.dataset = v.dataset;
    }
    current = &inst;
    currentRun = &r;
    for (const Stmt &s : alg.body)
      checkStmt(s, env);
    checkOffloads(inst);
    checkTokenizers(inst);
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

  /// A program tokenizes with one sentencepiece model: the models that name
  /// one agree.
  void checkTokenizers(const Instance &inst) {
    const Model *first = nullptr;
    for (const Model *m : inst.models) {
      if (m->tokenizer.empty())
        continue;
      if (!first) {
        first = m;
        continue;
      }
      if (m->tokenizer != first->tokenizer)
        error(m->tokenizerLoc,
              formatv("'{0}' uses tokenizer \"{1}\" but '{2}' uses \"{3}\"; "
                      "the models of a run share one tokenizer",
                      m->name, m->tokenizer, first->name, first->tokenizer))
                .attachNote(first->tokenizerLoc)
            << "'" << first->name << "' names its tokenizer here";
    }
  }

  /// An offloaded model rests in host memory in its call's layout: it has
  /// that one call, and no ema writes it.
  void checkOffloads(const Instance &inst) {
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

  std::optional<Value> bindParam(const Param &prm, const Expr &arg) {
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
      error(arg.loc, "parameter '" + prm.name + "' takes a " + prm.type + " name");
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

  std::optional<Value> evalValue(const Expr &e, llvm::StringMap<Local> &env) {
    switch (e.kind) {
    case Expr::Kind::Name: {
      if (auto it = env.find(e.text); it != env.end()) {
        it->second.used = true;
        if (it->second.value.kind == Value::Poisoned)
          return std::nullopt; // already reported
        return it->second.value;
      }
      if (auto ci = p.clusters.find(e.text); ci != p.clusters.end()) {
        Value v;
        v.kind = Value::Cluster;
        v.cluster = &ci->second;
        return v;
      }
      if (symbols.count(e.text)) {
        error(e.loc, formatv("'{0}' is a global {1}; pass it to the algorithm "
                             "as a parameter so the algorithm stays reusable",
                             e.text, symbols.at(e.text).kindName()));
        return std::nullopt;
      }
      error(e.loc, "unknown name '" + e.text + "'");
      return std::nullopt;
    }
    case Expr::Kind::Field: {
      auto base = evalValue(*e.base, env);
      if (!base)
        return std::nullopt;
      if (base->kind != Value::Record && base->kind != Value::Dataset) {
        error(e.loc, formatv("{0} has no fields", describe(*base)));
        return std::nullopt;
      }
      const Field *f = base->record.find(e.text);
      if (!f) {
        std::vector<std::string> names;
        for (auto &x : base->record.fields)
          names.push_back(x.name);
        std::string list;
        for (auto &n : names)
          list += (list.empty() ? "" : ", ") + n;
        auto diag = error(e.loc, formatv("no field '{0}' in {1} (fields: {2}){3}",
                                         e.text,
                                         base->kind == Value::Dataset
                                             ? "dataset '" + base->dataset->name + "'"
                                         : base->origin.empty()
                                             ? std::string("this record")
                                             : "'" + base->origin + "'",
                                         list, didYouMean(e.text, names)));
        if (base->defLoc)
          diag.attachNote(mlir::Location(base->defLoc)) << "defined here";
        return std::nullopt;
      }
      Value v;
      v.kind = Value::Tensor;
      v.tensor = f->type;
      v.producer = base->producer;
      v.field = f->name;
      v.origin = base->origin + "." + f->name;
      v.defLoc = base->defLoc;
      return v;
    }
    case Expr::Kind::Call: {
      // A nested call, e.g. the loss in `actor.train(ppo_actor_loss(g, adv))`,
      // becomes an unnamed node of its own that runs first.
      auto node = checkCall(e, env);
      if (!node)
        return std::nullopt;
      if (node->kind == Node::Kind::Ema || node->kind == Node::Kind::Train) {
        error(e.loc, "'" + std::string(nodeKindName(node->kind)) +
                         "' has no result to pass on; call it as a statement");
        return std::nullopt;
      }
      Value v;
      v.kind = Value::Record;
      v.record = node->result;
      v.producer = int(current->nodes.size());
      v.defLoc = e.loc;
      current->nodes.push_back(std::move(*node));
      return v;
    }
    case Expr::Kind::Number:
    case Expr::Kind::Neg:
    case Expr::Kind::Binary: {
      auto s = evalScalar(e);
      if (!s)
        return std::nullopt;
      Value v;
      v.kind = Value::Number;
      v.number = s->value;
      v.isInteger = s->isInteger;
      v.dim = s->dim;
      return v;
    }
    default:
      error(e.loc, "expected a value name, a field such as 'g.seq', or a number");
      return std::nullopt;
    }
  }

  void checkStmt(const Stmt &s, llvm::StringMap<Local> &env) {
    const Expr &e = *s.expr;
    // After an error, later uses of the result and the names this statement
    // read stay quiet instead of cascading into more errors and warnings.
    auto fail = [&] {
      markUsed(e, env);
      if (!s.target.empty()) {
        Value poisoned;
        poisoned.kind = Value::Poisoned;
        env.try_emplace(s.target, Local{poisoned, s.loc, true});
      }
    };
    if (e.kind != Expr::Kind::Call) {
      error(e.loc, "a statement must be a call, such as "
                   "'g = actor.generate(p.prompt, max_new_tokens = 128);'");
      fail();
      return;
    }
    std::optional<Node> node = checkCall(e, env);
    if (!node) {
      fail();
      return;
    }
    node->name = s.target;
    node->loc = s.target.empty() ? e.loc : s.loc;
    for (const Annotation &an : s.annotations)
      checkAnnotation(an, *node, env);
    if (!s.target.empty()) {
      if (node->kind == Node::Kind::Ema) {
        error(s.loc, "'ema' returns nothing; drop '" + s.target + " ='");
        return;
      }
      Value v;
      v.kind = Value::Record;
      v.record = node->result;
      v.producer = int(current->nodes.size());
      v.origin = s.target;
      v.defLoc = s.loc;
      env.try_emplace(s.target, Local{v, s.loc, false});
      if (node->kind == Node::Kind::Train)
        env.find(s.target)->second.used = true; // stats are optional
    }
    current->nodes.push_back(std::move(*node));
  }

  void markUsed(const Expr &e, llvm::StringMap<Local> &env) {
    if (e.kind == Expr::Kind::Name)
      if (auto it = env.find(e.text); it != env.end())
        it->second.used = true;
    for (const Expr *sub : {e.base.get(), e.lo.get(), e.hi.get()})
      if (sub)
        markUsed(*sub, env);
    for (const Arg &a : e.args)
      markUsed(*a.value, env);
    for (const ExprPtr &x : e.elems)
      markUsed(*x, env);
  }

  std::optional<Node> checkCall(const Expr &e, llvm::StringMap<Local> &env) {
    if (e.base->kind == Expr::Kind::Field)
      return checkMethodCall(e, env);
    if (e.base->kind == Expr::Kind::Name)
      return checkBuiltinCall(e, env);
    error(e.loc, "only model methods and built-in functions can be called");
    return std::nullopt;
  }

  /// Reads `name = value` settings of a call against the callee's table.
  bool readSettings(const Expr &call, llvm::ArrayRef<SettingSpec> specs,
                    size_t firstSetting, llvm::StringMap<Local> &env, Node &n,
                    StringRef callee) {
    bool ok = true;
    std::set<std::string> given;
    for (size_t i = firstSetting; i < call.args.size(); ++i) {
      const Arg &a = call.args[i];
      if (a.name.empty())
        continue;
      auto spec = llvm::find_if(specs, [&](const SettingSpec &s) { return a.name == s.name; });
      if (spec == specs.end())
        continue; // named tensor argument, handled by the caller
      if (!given.insert(a.name).second) {
        error(a.loc, "'" + a.name + "' is given twice");
        ok = false;
        continue;
      }
      auto v = evalValue(*a.value, env);
      if (!v)
        return false;
      if (v->kind != Value::Number) {
        error(a.value->loc, formatv("'{0}' of {1} is a number, not {2}", a.name,
                                    callee, describe(*v)));
        ok = false;
        continue;
      }
      if (v->dim != UnitDim::None) {
        error(a.value->loc, formatv("'{0}' of {1} is a plain number, not {2}",
                                    a.name, callee, unitDimName(v->dim)));
        ok = false;
        continue;
      }
      if (spec->integer && !v->isInteger) {
        error(a.value->loc, formatv("'{0}' of {1} must be an integer", a.name, callee));
        ok = false;
        continue;
      }
      if (v->number < spec->min || v->number > spec->max) {
        error(a.value->loc, formatv("'{0}' of {1} must be between {2} and {3}, got {4}",
                                    a.name, callee, formatNumber(spec->min),
                                    formatNumber(spec->max), formatNumber(v->number)));
        ok = false;
        continue;
      }
      n.attrs.emplace_back(a.name, v->number);
    }
    for (const SettingSpec &s : specs) {
      if (given.count(s.name))
        continue;
      if (s.required) {
        error(call.loc, formatv("{0} needs '{1} = ...'", callee, s.name));
        ok = false;
        continue;
      }
      n.attrs.emplace_back(s.name, s.fallback);
    }
    return ok;
  }

  std::optional<Node> checkMethodCall(const Expr &call, llvm::StringMap<Local> &env) {
    const Expr &callee = *call.base;
    auto recv = evalValue(*callee.base, env);
    if (!recv)
      return std::nullopt;
    if (recv->kind != Value::Model) {
      error(callee.loc, formatv("'{0}' is called on {1}; methods exist only on "
                                "models (generate, inference, train, ema)",
                                callee.text, describe(*recv)));
      return std::nullopt;
    }
    const sema::Model &model = *recv->model;
    const MethodSpec *spec = lookupMethod(callee.text);
    if (!spec) {
      std::vector<std::string> names = methodNames();
      error(callee.loc, formatv("model '{0}' has no method '{1}' (methods are "
                                "generate, inference, train and ema){2}",
                                model.name, callee.text, didYouMean(callee.text, names)));
      return std::nullopt;
    }
    Node n{spec->kind, "", call.loc};
    n.model = &model;
    std::string calleeName = "'" + model.name + "." + callee.text + "'";

    // The one positional input.
    std::vector<const Arg *> positional;
    for (const Arg &a : call.args)
      if (a.name.empty())
        positional.push_back(&a);
    for (const Arg &a : call.args)
      if (!a.name.empty() && !llvm::any_of(spec->settings, [&](const SettingSpec &s) {
            return a.name == s.name;
          })) {
        std::vector<std::string> names;
        for (auto &s : spec->settings)
          names.push_back(s.name);
        error(a.loc, formatv("{0} has no setting '{1}'{2}", calleeName, a.name,
                             didYouMean(a.name, names)));
        return std::nullopt;
      }
    if (positional.size() != 1) {
      error(call.loc, formatv("{0} takes one input ({1}), got {2}", calleeName,
                              spec->inputHelp, positional.size()));
      return std::nullopt;
    }
    if (!readSettings(call, spec->settings, 0, env, n, calleeName))
      return std::nullopt;
    const Expr &inExpr = *positional[0]->value;
    auto in = evalValue(inExpr, env);
    if (!in)
      return std::nullopt;

    auto modelNote = [&](mlir::InFlightDiagnostic &&d, StringRef what) {
      d.attachNote(mlir::Location(model.loc)) << "'" << model.name << "' " << what;
    };

    switch (spec->kind) {
    case Node::Kind::Generate: {
      if (model.head == Head::Value) {
        modelNote(error(callee.loc, formatv("cannot generate with '{0}': it has a "
                                            "value head, which scores sequences "
                                            "instead of predicting tokens",
                                            model.name)),
                  "is declared with 'head = value' here");
        return std::nullopt;
      }
      auto t = expectTensor(*in, inExpr, TensorKind::Tokens, "prompt", calleeName);
      if (!t)
        return std::nullopt;
      if (t->field != "prompt") {
        error(inExpr.loc, formatv("{0} needs prompt token ids, but '{1}' holds "
                                  "whole sequences; pass a dataset's 'prompt' field",
                                  calleeName,
                                  in->kind == Value::Tensor ? in->origin
                                                            : in->origin + "." + t->field));
        return std::nullopt;
      }
      int64_t groups = int64_t(n.attr("n", 1));
      int64_t gen = int64_t(n.attr("max_new_tokens", 0));
      int64_t N = t->type.batch() * groups, P = t->type.shape[1], S = P + gen;
      if (S > model.arch.maxSeq) {
        modelNote(error(call.loc, formatv("prompt length {0} plus max_new_tokens "
                                          "{1} exceeds the {2} positions of '{3}'",
                                          P, gen, model.arch.maxSeq, model.name)),
                  "is declared here");
        return std::nullopt;
      }
      n.inputs.push_back(*t);
      n.result.fields = {
          {"prompt", {TensorKind::Tokens, DType::I32, {N, P}}},
          {"seq", {TensorKind::Tokens, DType::I32, {N, S}}},
          {"logprobs", {TensorKind::Logprobs, DType::F32, {N, S}}},
          {"mask", {TensorKind::Mask, DType::I8, {N, S}}},
      };
      return n;
    }
    case Node::Kind::Inference: {
      auto t = expectTensor(*in, inExpr, TensorKind::Tokens, "seq", calleeName);
      if (!t)
        return std::nullopt;
      n.inputs.push_back(*t);
      int64_t N = t->type.shape[0], S = t->type.shape[1];
      if (S > model.arch.maxSeq) {
        modelNote(error(inExpr.loc, formatv("sequences of {0} tokens exceed the {1} "
                                            "positions of '{2}'",
                                            S, model.arch.maxSeq, model.name)),
                  "is declared here");
        return std::nullopt;
      }
      n.result.fields = {{"seq", t->type}};
      if (model.head == Head::LM) {
        n.result.fields.push_back({"logprobs", {TensorKind::Logprobs, DType::F32, {N, S}}});
      } else {
        n.result.fields.push_back({"values", {TensorKind::Values, DType::F32, {N, S}}});
        n.result.fields.push_back({"score", {TensorKind::Score, DType::F32, {N}}});
      }
      return n;
    }
    case Node::Kind::Train: {
      if (!model.trainable) {
        modelNote(error(callee.loc, formatv("cannot train '{0}': it is frozen",
                                            model.name)),
                  "is declared here; add 'trainable;' to its block to train it");
        return std::nullopt;
      }
      const Node *producer =
          in->kind == Value::Record && in->producer >= 0 &&
                  current->nodes[in->producer].kind == Node::Kind::Host
              ? &current->nodes[in->producer]
              : nullptr;
      const BuiltinSpec *lossSpec =
          producer ? lookupBuiltin(producer->builtin) : nullptr;
      bool fnLoss = producer && producer->fn && producer->fn->loss;
      if (!fnLoss &&
          (!lossSpec || !lossSpec->lossHead || !in->record.find("loss"))) {
        error(inExpr.loc, formatv("{0} takes a loss, such as "
                                  "'ppo_actor_loss(g, adv)', but got {1}",
                                  calleeName, describe(*in)));
        return std::nullopt;
      }
      const Node &lossNode = current->nodes[in->producer];
      const BuiltinSpec *loss =
          fnLoss ? nullptr : lookupBuiltin(lossNode.builtin);
      if (fnLoss && fnHead(*lossNode.fn) != model.head) {
        modelNote(error(inExpr.loc,
                        formatv("loss '{0}' reads {1} head, but "
                                "'{2}' has {3} head",
                                lossNode.builtin,
                                fnHead(*lossNode.fn) == Head::LM ? "an lm"
                                                                 : "a value",
                                model.name,
                                model.head == Head::LM ? "an lm" : "a value")),
                  "is declared here");
        return std::nullopt;
      }
      if (loss && loss->lossHead && *loss->lossHead != model.head) {
        modelNote(error(inExpr.loc, formatv("'{0}' trains a model with {1} head, "
                                            "but '{2}' has {3} head",
                                            lossNode.builtin,
                                            *loss->lossHead == Head::LM ? "an lm" : "a value",
                                            model.name,
                                            model.head == Head::LM ? "an lm" : "a value")),
                  "is declared here");
        return std::nullopt;
      }
      int64_t N = in->record.find("loss")->type.batch();
      for (const Node::Input &li : current->nodes[in->producer].inputs)
        if (li.type.kind == TensorKind::Tokens && li.type.shape.size() == 2 &&
            li.type.shape[1] > model.arch.maxSeq) {
          modelNote(error(inExpr.loc, formatv("sequences of {0} tokens exceed the "
                                              "{1} positions of '{2}'",
                                              li.type.shape[1], model.arch.maxSeq,
                                              model.name)),
                    "is declared here");
          return std::nullopt;
        }
      int64_t mb = int64_t(n.attr("minibatches", 1));
      if (N % mb) {
        error(call.loc, formatv("batch of {0} sequences cannot be split into {1} "
                                "minibatches; choose a divisor of {0}",
                                N, mb));
        return std::nullopt;
      }
      Node::Input lossIn{"loss", in->producer, "loss",
                         in->record.find("loss")->type};
      n.inputs.push_back(lossIn);
      n.result.fields = {{"loss", {TensorKind::Loss, DType::F32, {}}}};
      return n;
    }
    case Node::Kind::Ema: {
      if (in->kind != Value::Model) {
        error(inExpr.loc, formatv("{0} takes the model to average from, got {1}",
                                  calleeName, describe(*in)));
        return std::nullopt;
      }
      const sema::Model &src = *in->model;
      if (&src == &model) {
        error(inExpr.loc, "a model cannot be averaged into itself");
        return std::nullopt;
      }
      if (src.head != model.head) {
        modelNote(error(inExpr.loc, formatv("cannot average '{0}' into '{1}': one has "
                                            "an lm head and the other a value head",
                                            src.name, model.name)),
                  "is declared here");
        return std::nullopt;
      }
      if (src.arch.paramCount(src.head == Head::Value) !=
              model.arch.paramCount(model.head == Head::Value) ||
          src.arch.layers != model.arch.layers || src.arch.hidden != model.arch.hidden) {
        modelNote(error(inExpr.loc, formatv("cannot average '{0}' into '{1}': their "
                                            "architectures differ",
                                            src.name, model.name)),
                  "is declared here");
        return std::nullopt;
      }
      if (!src.trainable)
        warning(inExpr.loc, "'" + src.name + "' is never trained, so averaging "
                                              "it changes nothing");
      n.source = &src;
      return n;
    }
    default:
      return std::nullopt;
    }
  }

  /// Checks that `v` is a tensor of kind `k`, projecting a record to its
  /// field named `name` or its only field of that kind.
  std::optional<Node::Input> expectTensor(const Value &v, const Expr &at, TensorKind k,
                                          StringRef name, StringRef callee) {
    if (v.kind == Value::Record || v.kind == Value::Dataset) {
      const Field *pick = nullptr;
      int count = 0;
      for (const Field &f : v.record.fields)
        if (f.type.kind == k) {
          ++count;
          if (!pick || f.name == name)
            pick = &f;
        }
      if (count > 1 && pick->name != name) {
        error(at.loc, formatv("{0} is ambiguous for '{1}' of {2}: it has several "
                              "{3} fields; name one, e.g. '{4}.{5}'",
                              v.origin.empty() ? "this record" : "'" + v.origin + "'",
                              name, callee, tensorKindNoun(k), v.origin,
                              pick->name));
        return std::nullopt;
      }
      if (!pick) {
        auto d = error(at.loc, formatv("'{0}' of {1} needs {2}, but {3} has none",
                                       name, callee, tensorKindNoun(k),
                                       v.origin.empty() ? describe(v) : "'" + v.origin + "' " +
                                                                              v.record.str()));
        if (v.defLoc && !v.origin.empty())
          d.attachNote(mlir::Location(v.defLoc)) << "'" << v.origin << "' is defined here";
        return std::nullopt;
      }
      return Node::Input{name.str(), v.producer, pick->name, pick->type};
    }
    if (v.kind != Value::Tensor || v.tensor.kind != k) {
      auto d = error(at.loc, formatv("'{0}' of {1} needs {2}, but got {3}", name, callee,
                                     tensorKindNoun(k), describe(v)));
      if (v.kind == Value::Tensor && v.defLoc && !v.origin.empty())
        d.attachNote(mlir::Location(v.defLoc)) << "'" << v.origin << "' is defined here";
      return std::nullopt;
    }
    return Node::Input{name.str(), v.producer, v.field, v.tensor};
  }

  std::optional<Node> checkBuiltinCall(const Expr &call, llvm::StringMap<Local> &env) {
    const std::string &fname = call.base->text;
    const BuiltinSpec *spec = lookupBuiltin(fname);
    // A function of the program or its imports replaces a built-in of the
    // same name (the stdlib re-expresses them).
    if (const ast::FnDecl *fn = fns.find(fname))
      return checkFnCall(call, *fn, env);
    if (!spec) {
      if (lookupFnPrimitive(fname)) {
        error(call.base->loc, "'" + fname +
                                  "' works inside functions; write "
                                  "an 'fn' that uses it and call that");
        return std::nullopt;
      }
      if (env.count(fname) || symbols.count(fname))
        error(call.base->loc, "'" + fname + "' is not a function");
      else
        error(call.base->loc, formatv("unknown function '{0}'{1}", fname,
                                      didYouMean(fname, builtinNames())));
      return std::nullopt;
    }
    Node n{Node::Kind::Host, "", call.loc};
    n.builtin = fname;
    std::string calleeName = "'" + fname + "'";
    // Split arguments: tensors by position or name, settings by name.
    std::vector<const Arg *> tensorArgs(spec->inputs.size(), nullptr);
    size_t pos = 0;
    for (const Arg &a : call.args) {
      if (a.name.empty()) {
        if (pos >= spec->inputs.size()) {
          std::string settings;
          for (const SettingSpec &st : spec->settings)
            settings += (settings.empty() ? "" : ", ") + std::string(st.name);
          error(a.loc, formatv("{0} takes {1} input{2} {3}{4}", calleeName,
                               spec->inputs.size(), spec->inputs.size() == 1 ? "" : "s",
                               spec->signature,
                               settings.empty() ? std::string()
                                                : "; its settings (" + settings +
                                                      ") are named, e.g. '" +
                                                      spec->settings.front().name +
                                                      " = ...'"));
          return std::nullopt;
        }
        tensorArgs[pos++] = &a;
        continue;
      }
      auto in = llvm::find_if(spec->inputs, [&](const InputSpec &s) { return a.name == s.name; });
      if (in != spec->inputs.end()) {
        size_t idx = in - spec->inputs.begin();
        if (tensorArgs[idx]) {
          error(a.loc, "'" + a.name + "' is given twice");
          return std::nullopt;
        }
        tensorArgs[idx] = &a;
        continue;
      }
      if (!llvm::any_of(spec->settings, [&](const SettingSpec &s) { return a.name == s.name; })) {
        std::vector<std::string> names;
        for (auto &s : spec->inputs)
          names.push_back(s.name);
        for (auto &s : spec->settings)
          names.push_back(s.name);
        error(a.loc, formatv("{0} has no argument '{1}'{2}", calleeName, a.name,
                             didYouMean(a.name, names)));
        return std::nullopt;
      }
    }
    for (size_t i = 0; i < spec->inputs.size(); ++i)
      if (!tensorArgs[i]) {
        error(call.loc, formatv("{0} is missing its '{1}' input; it takes {2}",
                                calleeName, spec->inputs[i].name, spec->signature));
        return std::nullopt;
      }
    if (!readSettings(call, spec->settings, 0, env, n, calleeName))
      return std::nullopt;

    for (size_t i = 0; i < spec->inputs.size(); ++i) {
      const InputSpec &is = spec->inputs[i];
      const Expr &ex = *tensorArgs[i]->value;
      auto v = evalValue(ex, env);
      if (!v)
        return std::nullopt;
      if (is.fields.empty()) {
        auto t = expectTensor(*v, ex, is.kind, is.name, calleeName);
        if (!t)
          return std::nullopt;
        n.inputs.push_back(*t);
        continue;
      }
      // A record input: every listed field must be there with its kind.
      if (v->kind != Value::Record) {
        error(ex.loc, formatv("'{0}' of {1} must be a record with fields {2}, "
                              "such as the result of a generate call; got {3}",
                              is.name, calleeName, is.fieldList(), describe(*v)));
        return std::nullopt;
      }
      for (auto &[fname2, kind] : is.fields) {
        const Field *f = v->record.find(fname2);
        if (!f || f->type.kind != kind) {
          auto d = error(ex.loc, formatv("'{0}' of {1} needs a field '{2}' with {3}, "
                                         "but '{4}' is {5}",
                                         is.name, calleeName, fname2,
                                         tensorKindNoun(kind), v->origin,
                                         v->record.str()));
          if (v->defLoc && !v->origin.empty())
            d.attachNote(mlir::Location(v->defLoc)) << "'" << v->origin << "' is defined here";
          return std::nullopt;
        }
        n.inputs.push_back(Node::Input{is.name + "." + fname2, v->producer,
                                       fname2, f->type});
      }
    }
    // All inputs describe the same sequences: batch sizes must agree.
    const Node::Input *first = nullptr;
    for (const Node::Input &in : n.inputs) {
      if (!first) {
        first = &in;
        continue;
      }
      // Dataset columns (one row per prompt) pair with n samples per prompt.
      int64_t a = in.type.batch(), b = first->type.batch();
      bool repeats = (in.producer < 0 && b % a == 0) || (first->producer < 0 && a % b == 0);
      if (a != b && !repeats) {
        error(call.loc, formatv("inputs of {0} disagree on the batch: '{1}' has {2} "
                                "rows but '{3}' has {4}",
                                calleeName, first->param, first->type.batch(),
                                in.param, in.type.batch()));
        return std::nullopt;
      }
    }
    int64_t N = 1;
    for (const Node::Input &in : n.inputs)
      N = std::max(N, in.type.batch());
    int64_t S = 1;
    for (const Node::Input &in : n.inputs)
      if (in.type.shape.size() == 2 && in.type.kind != TensorKind::Answer)
        S = std::max(S, in.type.shape[1]);
    if (int64_t g = int64_t(n.attr("group", 0)); g > 0 && N % g) {
      error(call.loc, formatv("batch of {0} sequences does not split into groups of "
                              "{1}; generate with 'n = {1}' so every prompt has a "
                              "full group",
                              N, g));
      return std::nullopt;
    }
    n.result = spec->result(N, S);
    return n;
  }

  void checkAnnotation(const Annotation &an, Node &n, llvm::StringMap<Local> &env) {
    if (an.name != "place") {
      error(an.loc, "unknown annotation '@" + an.name + "'; the only one is "
                    "'@place(mesh = c[0:8], dp = 2, tp = 4, pp = 1)'");
      return;
    }
    if (n.kind == Node::Kind::Host) {
      error(an.loc, "'@place' pins model calls; host functions run on the controller");
      return;
    }
    if (n.kind == Node::Kind::Ema) {
      error(an.loc, "'@place' pins generate, inference and train calls; 'ema' "
                    "runs where its models are");
      return;
    }
    if (n.placement) {
      error(an.loc, "a call has at most one '@place'");
      return;
    }
    Placement pl;
    pl.loc = an.loc;
    bool haveMesh = false;
    const sema::Cluster *c = current->cluster;
    for (const Arg &a : an.args) {
      if (a.name == "mesh") {
        haveMesh = true;
        const Expr *base = a.value.get();
        int64_t lo = 0, hi = -1;
        if (base->kind == Expr::Kind::Slice) {
          auto l = evalInt(*base->lo, "mesh start", 0, int64_t(1) << 30);
          auto h = evalInt(*base->hi, "mesh end", 1, int64_t(1) << 30);
          if (!l || !h)
            return;
          lo = *l;
          hi = *h;
          base = base->base.get();
        }
        if (base->kind != Expr::Kind::Name || !p.clusters.count(base->text)) {
          error(base->loc, "mesh must be a cluster or a slice of one, such as c[0:8]");
          return;
        }
        if (c && base->text != c->name) {
          error(base->loc, formatv("mesh is on cluster '{0}', but this run uses "
                                   "cluster '{1}'",
                                   base->text, c->name));
          return;
        }
        c = &p.clusters.at(base->text);
        if (hi < 0)
          hi = c->gpus();
        if (lo >= hi || hi > c->gpus()) {
          error(a.value->loc, formatv("mesh [{0}:{1}] is not a non-empty range of "
                                      "the {2} GPUs of cluster '{3}'",
                                      lo, hi, c->gpus(), c->name));
          return;
        }
        pl.firstGpu = lo;
        pl.numGpus = hi - lo;
        continue;
      }
      if (a.name == "offload" || a.name == "recompute" || a.name == "zero") {
        if (a.value->kind != Expr::Kind::Bool) {
          error(a.value->loc, formatv("'{0}' is true or false", a.name));
          return;
        }
        auto [flag, flagLoc] =
            a.name == "offload"     ? std::tie(pl.offload, pl.offloadLoc)
            : a.name == "recompute" ? std::tie(pl.recompute, pl.recomputeLoc)
                                    : std::tie(pl.zero, pl.zeroLoc);
        flag = a.value->boolean;
        flagLoc = a.loc;
        continue;
      }
      int64_t *dst = a.name == "dp"    ? &pl.dp
                     : a.name == "tp"  ? &pl.tp
                     : a.name == "pp"  ? &pl.pp
                     : a.name == "mbs" ? &pl.microBatches
                                       : nullptr;
      if (a.name.empty()) {
        error(a.loc, "'@place' settings are named: write 'mesh = c[0:8]', 'dp = 2'...");
        return;
      }
      if (!dst) {
        error(a.loc,
              formatv("unknown '@place' setting '{0}' (settings are mesh, "
                      "dp, tp, pp, mbs, offload, recompute and zero){1}",
                      a.name,
                      didYouMean(a.name, {"mesh", "dp", "tp", "pp", "mbs",
                                          "offload", "recompute", "zero"})));
        return;
      }
      auto v = evalInt(*a.value, "'" + a.name + "'", 1, 1 << 20);
      if (!v)
        return;
      *dst = *v;
    }
    if (!haveMesh) {
      error(an.loc, "'@place' needs a mesh, such as 'mesh = c[0:8]'");
      return;
    }
    if (pl.dp * pl.tp * pl.pp != pl.numGpus) {
      error(an.loc, formatv("dp*tp*pp = {0}*{1}*{2} = {3}, but the mesh has {4} "
                            "GPUs; the product must equal the mesh size",
                            pl.dp, pl.tp, pl.pp, pl.dp * pl.tp * pl.pp, pl.numGpus));
      return;
    }
    if (c && pl.tp > c->gpusPerNode) {
      error(an.loc, formatv("tp = {0} spans nodes; tensor parallelism must stay "
                            "within the {1} GPUs of a node",
                            pl.tp, c->gpusPerNode));
      return;
    }
    if (int64_t g = c ? mlir::rlhf::tpGroupAcrossNodes(pl.firstGpu, pl.numGpus,
                                                       pl.tp, c->gpusPerNode)
                      : -1;
        g >= 0) {
      error(an.loc,
            formatv("the tensor-parallel group of GPUs [{0}:{1}] spans "
                    "two nodes; start the mesh at a multiple of tp = {2} "
                    "within a node",
                    g, g + pl.tp, pl.tp));
      return;
    }
    const sema::Arch &arch = n.model->arch;
    if (arch.heads % pl.tp || arch.kvHeads % pl.tp) {
      error(an.loc, formatv("tp = {0} does not divide the {1} heads and {2} kv "
                            "heads of '{3}'",
                            pl.tp, arch.heads, arch.kvHeads, n.model->name));
      return;
    }
    if (pl.pp > arch.layers) {
      error(an.loc, formatv("pp = {0} exceeds the {1} layers of '{2}'", pl.pp,
                            arch.layers, n.model->name));
      return;
    }
    int64_t N = n.inputs.empty() ? 0 : n.inputs.front().type.batch();
    if (n.kind == Node::Kind::Generate)
      N *= int64_t(n.attr("n", 1));
    if (N && N % (pl.dp * pl.microBatches)) {
      error(an.loc, formatv("batch of {0} sequences does not split over dp = {1} "
                            "with mbs = {2} micro-batches",
                            N, pl.dp, pl.microBatches));
      return;
    }
    if (pl.offload && n.model->trainable) {
      error(pl.offloadLoc,
            formatv("'{0}' is trainable and cannot be offloaded; "
                    "offload keeps a frozen model's weights in "
                    "host memory between its calls",
                    n.model->name));
      return;
    }
    if (pl.recompute && n.kind != Node::Kind::Train) {
      error(pl.recomputeLoc,
            "'recompute' applies to train calls: it trades a second forward "
            "pass in backward for the activations training keeps; drop it "
            "here");
      return;
    }
    if (pl.zero && n.kind != Node::Kind::Train) {
      error(pl.zeroLoc, "'zero' applies to train calls: it shards the "
                        "optimizer state that training keeps; drop it here");
      return;
    }
    if (pl.zero && pl.dp < 2) {
      error(pl.zeroLoc, "'zero' slices the optimizer state over the "
                        "data-parallel ranks, and with dp = 1 there is one; "
                        "raise dp or drop 'zero'");
      return;
    }
    if (pl.offload && c && !(c->hardware->hostBandwidth > 0)) {
      error(pl.offloadLoc, formatv("hardware '{0}' declares no host_bandwidth; "
                                   "add 'host_bandwidth = ...' (the GPU's PCIe "
                                   "link, one direction) to offload",
                                   c->hardware->name));
      return;
    }
    (void)env;
    n.placement = pl;
  }

  Program &p;
  mlir::MLIRContext &ctx;
  FnChecker fns;
  bool failed = false;
  unsigned numErrors = 0;
  std::map<std::string, Symbol> symbols;
  std::set<std::string> brokenArchs; // archs whose errors were reported
  /// `: hf("dir")` imports by declaration, read once (nullopt: reported).
  std::map<const EntityDecl *, std::optional<HfImport>> hfImports;
  /// The import the last gatherProps met on its chain, if any.
  const HfImport *gatheredHf = nullptr;

  /// A call of a function written in the language: binds its tensors and
  /// numbers, then instantiates its body for them.
  std::optional<Node> checkFnCall(const Expr &call, const ast::FnDecl &fn,
                                  llvm::StringMap<Local> &env) {
    std::string callee = "'" + fn.name + "'";
    std::string sig = callee + " takes " + FnChecker::signature(fn);
    const size_t np = fn.params.size();
    auto isTensor = [&](size_t i) {
      return !FnChecker::isNumber(fn.params[i].type) ||
             !fn.params[i].type.dims.empty();
    };
    // What each parameter is bound to. A record passed positionally fills
    // the parameters from there on that it has fields named like (so
    // 'ppo_actor_loss(g, adv)' binds g.seq and g.logprobs).
    std::vector<std::optional<Value>> vals(np);
    std::vector<const Expr *> exprs(np, nullptr);
    std::vector<bool> byName(np, false);
    size_t pos = 0;
    for (const Arg &a : call.args) {
      if (a.name.empty()) {
        if (pos >= np) {
          error(a.loc, "too many arguments: " + sig);
          return std::nullopt;
        }
        auto v = evalValue(*a.value, env);
        if (!v)
          return std::nullopt;
        bool spread = false;
        if (v->kind == Value::Record || v->kind == Value::Dataset)
          while (pos < np && isTensor(pos) && !exprs[pos] &&
                 v->record.find(fn.params[pos].name)) {
            vals[pos] = v;
            exprs[pos] = a.value.get();
            byName[pos++] = spread = true;
          }
        if (!spread) {
          vals[pos] = v;
          exprs[pos++] = a.value.get();
        }
        continue;
      }
      auto it = llvm::find_if(
          fn.params, [&](const ast::FnParam &q) { return q.name == a.name; });
      if (it == fn.params.end()) {
        std::vector<std::string> names;
        for (auto &q : fn.params)
          names.push_back(q.name);
        error(a.loc, formatv("{0} has no parameter '{1}'{2}", callee, a.name,
                             didYouMean(a.name, names)));
        return std::nullopt;
      }
      size_t idx = size_t(it - fn.params.begin());
      if (exprs[idx]) {
        error(a.loc, "'" + a.name + "' is given twice");
        return std::nullopt;
      }
      auto v = evalValue(*a.value, env);
      if (!v)
        return std::nullopt;
      vals[idx] = v;
      exprs[idx] = a.value.get();
    }
    Node n{Node::Kind::Host, "", call.loc};
    n.builtin = fn.name;
    std::vector<FnArg> args;
    for (size_t i = 0; i < np; ++i) {
      const ast::FnParam &prm = fn.params[i];
      FnArg arg;
      if (!exprs[i]) {
        if (!prm.fallback) {
          error(call.loc, "missing argument '" + prm.name + "': " + sig);
          return std::nullopt;
        }
        auto s = evalScalar(*prm.fallback);
        if (!s)
          return std::nullopt;
        arg.number = s->value;
        arg.integer = s->isInteger;
        args.push_back(arg);
        continue;
      }
      const Expr &ex = *exprs[i];
      const Value &v = *vals[i];
      arg.loc = ex.loc;
      if (!isTensor(i)) {
        if (v.kind != Value::Number || v.dim != UnitDim::None) {
          error(ex.loc,
                formatv("'{0}' of {1} is a plain number, not {2}", prm.name,
                        callee,
                        v.kind == Value::Number ? unitDimName(v.dim).str()
                                                : describe(v)));
          return std::nullopt;
        }
        if (prm.type.kind == "int" && !v.isInteger) {
          error(ex.loc, "'" + prm.name + "' of " + callee + " is an int");
          return std::nullopt;
        }
        arg.number = v.number;
        arg.integer = v.isInteger;
        args.push_back(arg);
        continue;
      }
      // A tensor: a field, a record's field named like the parameter, or
      // its only field of the parameter's kind.
      std::optional<Node::Input> t;
      std::optional<TensorKind> k = FnChecker::kindOf(prm.type);
      if (byName[i]) {
        const Field *f = v.record.find(prm.name);
        t = Node::Input{prm.name, v.producer, f->name, f->type};
      } else if (k) {
        t = expectTensor(v, ex, *k, prm.name, callee);
        if (!t)
          return std::nullopt;
      } else if (v.kind == Value::Tensor &&
                 v.tensor.kind != TensorKind::Tokens &&
                 v.tensor.kind != TensorKind::Answer) {
        t = Node::Input{prm.name, v.producer, v.field, v.tensor};
      } else {
        error(ex.loc,
              formatv("'{0}' of {1} takes numbers {2}, but got {3}", prm.name,
                      callee, prm.type.dims.size() == 1 ? "[N]" : "[N, S]",
                      describe(v)));
        return std::nullopt;
      }
      t->param = prm.name;
      if (k && t->type.kind != *k) {
        error(ex.loc, formatv("'{0}' of {1} takes {2}, but '{3}' holds {4}",
                              prm.name, callee, tensorKindNoun(*k), t->field,
                              tensorKindNoun(t->type.kind)));
        return std::nullopt;
      }
      if (t->type.shape.size() != prm.type.dims.size()) {
        error(ex.loc,
              formatv("'{0}' of {1} is {2} {3}, but {4} is {5}", prm.name,
                      callee,
                      prm.type.dims.size() == 1 ? "per sequence" : "per token",
                      prm.type.dims.size() == 1 ? "[N]" : "[N, S]",
                      v.origin.empty() ? std::string("the argument")
                                       : "'" + v.origin + "'",
                      t->type.str()));
        return std::nullopt;
      }
      arg.tensor = t->type;
      n.inputs.push_back(*t);
      args.push_back(arg);
    }
    auto body = fns.instantiate(fn, args, call.loc, n.result);
    if (!body)
      return std::nullopt;
    n.fn = std::make_shared<const FnBody>(std::move(*body));
    return n;
  }

  const HfImport *hfImport(const EntityDecl &d) {
    auto it = hfImports.find(&d);
    if (it == hfImports.end())
      it = hfImports.emplace(&d, importHf(d)).first;
    return it->second ? &*it->second : nullptr;
  }
  std::vector<std::string> symbolOrder;
  Instance *current = nullptr;
  const RunDecl *currentRun = nullptr;
};

} // namespace

mlir::LogicalResult sema::check(Program &p, mlir::MLIRContext &ctx) {
  return Sema(p, ctx).run();
}
