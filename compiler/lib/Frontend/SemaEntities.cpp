//===- SemaEntities.cpp - properties, constants and declarations ----------===//

#include "SemaImpl.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

std::optional<int64_t> Sema::evalInt(const Expr &e, StringRef what, int64_t lo,
                                     int64_t hi) {
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

bool Sema::checkRequired(const EntityDecl &d, llvm::ArrayRef<PropSpec> specs,
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
  error(d.loc,
        formatv("{0} '{1}' is missing {2} {3}", entityKindName(d.kind), d.name,
                missing.size() == 1 ? "property" : "properties", list));
  return false;
}

bool Sema::gatherProps(const EntityDecl &d, llvm::ArrayRef<PropSpec> specs,
                       PropMap &out, std::vector<const EntityDecl *> &chain) {
  if (llvm::is_contained(chain, &d)) {
    auto diag = error(d.loc, formatv("{0} '{1}' derives from itself",
                                     entityKindName(d.kind), d.name));
    for (auto *c : chain)
      diag.attachNote(c->baseLoc)
          << "'" << c->name << "' derives from '" << c->base << "' here";
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
    } else if (auto *b =
                   lookupEntity(d.base, baseKind, d.baseLoc,
                                entityKindName(baseKind).str() + " preset")) {
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
    if (!llvm::any_of(specs,
                      [&](const PropSpec &s) { return prop.name == s.name; })) {
      error(prop.loc, formatv("unknown property '{0}' in {1} '{2}'{3}",
                              prop.name, entityKindName(d.kind), d.name,
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
    // A model of an hf() import loads the checkpoint's weights, whose
    // shapes these properties would contradict (found only at run start).
    // Once per property: an arch is gathered again for each model of it.
    if (d.basePath && gatheredHf &&
        (d.kind == EntityKind::Arch || d.kind == EntityKind::Model) &&
        hfOverridesChecked.insert(&prop).second) {
      const rlhf::ModelShape &cs = gatheredHf->arch.shape;
      if (llvm::is_contained(
              {"hidden", "heads", "kv_heads", "ffn", "vocab", "qkv_bias"},
              prop.name)) {
        error(prop.loc, formatv("'{0}' cannot change '{1}', whose models load "
                                "their weights from '{2}': they have the "
                                "checkpoint's shapes; remove it",
                                prop.name, d.name, gatheredHf->dir));
        ok = false;
        continue;
      }
      if (prop.name == "layers")
        warning(prop.loc,
                formatv("'layers' overrides the checkpoint's {0}: "
                        "models of '{1}' load the first layers only and "
                        "drop the rest of its weights",
                        cs.layers, d.name));
      if (prop.name == "tie_embeddings" && !cs.tieEmbeddings)
        warning(prop.loc,
                formatv("'tie_embeddings' drops the checkpoint's own "
                        "lm_head.weight: models of '{0}' compute logits "
                        "with their input embedding instead",
                        d.name));
    }
    out[prop.name] = &prop;
  }
  chain.pop_back();
  return ok;
}

std::optional<Scalar> Sema::evalScalar(const Expr &e) {
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
  case Expr::Kind::Name: {
    if (!numberScope) {
      error(e.loc, "expected a number, not the name '" + e.text + "'");
      return std::nullopt;
    }
    auto v = evalValue(e, *numberScope);
    if (!v)
      return std::nullopt;
    if (v->kind != Value::Number) {
      error(e.loc, formatv("'{0}' is {1}, not a number", e.text, describe(*v)));
      return std::nullopt;
    }
    return Scalar{v->number, v->isInteger, v->dim};
  }
  default:
    error(e.loc, "expected a number");
    return std::nullopt;
  }
}

std::optional<double> Sema::evalNumber(const Expr &e, UnitDim dim,
                                       StringRef what) {
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

std::optional<std::string> Sema::evalString(const Expr &e, StringRef what) {
  if (e.kind != Expr::Kind::String) {
    error(e.loc, formatv("{0} must be a string in double quotes", what));
    return std::nullopt;
  }
  return e.text;
}

std::optional<std::string> Sema::evalName(const Expr &e, StringRef what) {
  if (e.kind != Expr::Kind::Name) {
    error(e.loc, formatv("{0} must be a name", what));
    return std::nullopt;
  }
  return e.text;
}

void Sema::setNum(const PropMap &m, StringRef key, UnitDim dim, double &dst) {
  if (auto *prop = m.lookup(key))
    if (checkHasValue(*prop))
      if (auto v = evalNumber(*prop->value, dim, "'" + key.str() + "'")) {
        if (*v <= 0)
          error(prop->value->loc, "'" + key + "' must be positive");
        dst = *v;
      }
}

bool Sema::flag(const PropMap &m, StringRef key) {
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

bool Sema::checkHasValue(const Property &prop) {
  if (prop.value)
    return true;
  error(prop.loc,
        "'" + prop.name + "' needs a value: write '" + prop.name + " = ...;'");
  return false;
}

void Sema::resolveEntity(const std::string &name) {
  Symbol &s = symbols.at(name);
  if (s.kind != Symbol::Entity)
    return;
  const EntityDecl &d = *s.entity;
  switch (d.kind) {
  case EntityKind::Hardware:
    resolveHardware(d);
    break;
  case EntityKind::Arch:
    resolveArch(d);
    break;
  case EntityKind::Cluster:
    resolveCluster(d);
    break;
  case EntityKind::Model:
    resolveModel(d);
    break;
  case EntityKind::Dataset:
    resolveDataset(d);
    break;
  }
}

const Hardware *Sema::resolveHardware(const EntityDecl &d) {
  if (auto it = p.hardware.find(d.name); it != p.hardware.end())
    return &it->second;
  if (!broken.insert(d.name).second)
    return nullptr; // already reported
  PropMap m;
  std::vector<const EntityDecl *> chain;
  if (!gatherProps(d, kHardwareProps, m, chain) ||
      !checkRequired(d, kHardwareProps, m))
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
  broken.erase(d.name);
  return &(p.hardware[d.name] = h);
}

bool Sema::fillArch(const EntityDecl &d, const PropMap &m, Arch &a) {
  if (gatheredHf) // the checkpoint's, then the declaration's properties
    applyHf(*gatheredHf, a);
  a.name = d.name;
  a.loc = d.loc;
  setInt(m, "layers", a.layers, 1, mlir::rlhf::kMaxLayers);
  setInt(m, "hidden", a.hidden, 1, mlir::rlhf::kMaxHidden);
  setInt(m, "heads", a.heads, 1, mlir::rlhf::kMaxHeads);
  if (!gatheredHf || m.lookup("heads"))
    a.kvHeads = a.heads;
  setInt(m, "kv_heads", a.kvHeads, 1, mlir::rlhf::kMaxHeads);
  setInt(m, "ffn", a.ffn, 1, mlir::rlhf::kMaxFfn);
  setInt(m, "vocab", a.vocab, 1, mlir::rlhf::kMaxVocab);
  setInt(m, "max_seq", a.maxSeq, 1, mlir::rlhf::kMaxSeqLen);
  if (!gatheredHf || m.lookup("tie_embeddings"))
    a.tieEmbeddings = flag(m, "tie_embeddings");
  if (!gatheredHf || m.lookup("qkv_bias"))
    a.qkvBias = flag(m, "qkv_bias");
  // RoPE and RMSNorm as the checkpoint's config.json gives them.
  setNum(m, "rope_theta", UnitDim::None, a.ropeTheta);
  setNum(m, "norm_eps", UnitDim::None, a.normEps);
  if (auto *r = m.lookup("rope_scaling"); r && checkHasValue(*r))
    parseRopeScaling(*r->value, a.rope);
  bool ok = true;
  if (a.heads && a.hidden % a.heads) {
    error(m.lookup("heads")->loc,
          formatv("hidden size {0} is not divisible by {1} heads", a.hidden,
                  a.heads));
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

const Arch *Sema::resolveArch(const EntityDecl &d) {
  if (auto it = p.archs.find(d.name); it != p.archs.end())
    return &it->second;
  if (!broken.insert(d.name).second)
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
  broken.erase(d.name);
  return &(p.archs[d.name] = a);
}

void Sema::resolveCluster(const EntityDecl &d) {
  PropMap m;
  std::vector<const EntityDecl *> chain;
  if (d.base.empty()) {
    error(d.loc, formatv("cluster '{0}' needs a hardware preset: write "
                         "'cluster {0} : H100_SXM {{ ... }'",
                         d.name));
    return;
  }
  if (!gatherProps(d, kClusterProps, m, chain) ||
      !checkRequired(d, kClusterProps, m))
    return;
  const EntityDecl *hw =
      lookupEntity(d.base, EntityKind::Hardware, d.baseLoc, "hardware preset");
  Cluster c;
  c.name = d.name;
  c.loc = d.loc;
  c.hardware = hw ? resolveHardware(*hw) : nullptr;
  setInt(m, "nodes", c.nodes, 1, mlir::rlhf::kMaxNodes);
  setInt(m, "gpus_per_node", c.gpusPerNode, 1, mlir::rlhf::kMaxGpusPerNode);
  if (c.hardware)
    p.clusters[d.name] = c;
}

void Sema::resolveModel(const EntityDecl &d) {
  PropMap m;
  std::vector<const EntityDecl *> chain;
  std::vector<PropSpec> specs = declarationProps("model");
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
  if (gatheredHf && !gatheredHf->tokenizer.empty() && !m.lookup("tokenizer")) {
    model.tokenizer = gatheredHf->tokenizer;
    model.tokenizerLoc = d.basePath ? d.basePathLoc : d.baseLoc;
  }
  if (gatheredHf && gatheredHf->byteFallbackOnly && !m.lookup("tokenizer"))
    error(d.basePath ? d.basePathLoc : d.baseLoc,
          "the checkpoint's tokenizer.json is a byte_fallback BPE (as "
          "LLaMA-2's and Mistral's), which rlhfc reads from the sentencepiece "
          "tokenizer.model it comes from, and '" +
              gatheredHf->dir +
              "' has none; copy the checkpoint's tokenizer.model there, or "
              "name one with 'tokenizer = \"DIR/tokenizer.model\";'");
  bool trainable = flag(m, "trainable"), frozen = flag(m, "frozen");
  if (trainable && frozen)
    error(m.lookup("frozen")->loc,
          "a model cannot be both 'trainable' and 'frozen'");
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
        error(t->value->loc,
              "'tokenizer' names a sentencepiece .model file or a "
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

void Sema::parseRopeScaling(const Expr &e, rlhf::RopeScaling &r) {
  if (e.kind != Expr::Kind::Call || e.base->kind != Expr::Kind::Name ||
      e.base->text != "llama3") {
    error(e.loc, "rope_scaling is LLaMA-3's, written 'llama3(factor = 8, "
                 "low_freq_factor = 1, high_freq_factor = 4, "
                 "original_max_seq = 8192)'");
    return;
  }
  double original = double(r.originalMaxPositions);
  r.factor = 8; // Meta's LLaMA-3.1 values unless given
  readNamedNumbers(e,
                   {{"factor", &r.factor},
                    {"low_freq_factor", &r.lowFreqFactor},
                    {"high_freq_factor", &r.highFreqFactor},
                    {"original_max_seq", &original}},
                   "rope_scaling", "factor = 8", /*zeroAllowed=*/false);
  if (r.lowFreqFactor >= r.highFreqFactor)
    error(e.loc, "low_freq_factor must be below high_freq_factor, as in "
                 "LLaMA-3.1's 1 and 4");
  r.originalMaxPositions = int64_t(original);
}

void Sema::readNamedNumbers(
    const Expr &call,
    llvm::ArrayRef<std::pair<llvm::StringRef, double *>> slots,
    llvm::StringRef noun, llvm::StringRef example, bool zeroAllowed,
    llvm::ArrayRef<llvm::StringRef> others) {
  for (const Arg &a : call.args) {
    if (a.name.empty()) {
      error(a.loc,
            formatv("{0} settings are named: write '{1}'", noun, example));
      continue;
    }
    if (llvm::is_contained(others, a.name))
      continue;
    auto slot =
        llvm::find_if(slots, [&](const auto &s) { return s.first == a.name; });
    if (slot == slots.end()) {
      std::vector<std::string> keys;
      for (const auto &s : slots)
        keys.push_back(s.first.str());
      for (StringRef o : others)
        keys.push_back(o.str());
      error(a.loc, formatv("unknown {0} setting '{1}'{2}", noun, a.name,
                           didYouMean(a.name, keys)));
      continue;
    }
    if (auto v = evalNumber(*a.value, UnitDim::None, "'" + a.name + "'")) {
      if (zeroAllowed ? *v < 0 : !(*v > 0))
        error(a.value->loc,
              "'" + a.name + "' must " +
                  (zeroAllowed ? "not be negative" : "be positive"));
      *slot->second = *v;
    }
  }
}

const HfImport *Sema::hfImport(const EntityDecl &d) {
  auto it = hfImports.find(&d);
  if (it == hfImports.end()) {
    it = hfImports.emplace(&d, importHf(d)).first;
    if (!it->second) { // importHf reported why
      failed = true;
      ++numErrors;
    }
  }
  return it->second ? &*it->second : nullptr;
}
