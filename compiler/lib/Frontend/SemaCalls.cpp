//===- SemaCalls.cpp - model methods, built-ins, functions, annotations ---===//

#include "SemaImpl.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

std::optional<Node> Sema::checkCall(const Expr &e,
                                    llvm::StringMap<Local> &env) {
  if (e.base->kind == Expr::Kind::Field)
    return checkMethodCall(e, env);
  if (e.base->kind == Expr::Kind::Name)
    return checkBuiltinCall(e, env);
  error(e.loc, "only model methods and built-in functions can be called");
  return std::nullopt;
}

bool Sema::readSettings(const Expr &call, llvm::ArrayRef<SettingSpec> specs,
                        size_t firstSetting, llvm::StringMap<Local> &env,
                        Node &n, StringRef callee) {
  bool ok = true;
  std::set<std::string> given;
  for (size_t i = firstSetting; i < call.args.size(); ++i) {
    const Arg &a = call.args[i];
    if (a.name.empty())
      continue;
    auto spec = llvm::find_if(
        specs, [&](const SettingSpec &s) { return a.name == s.name; });
    if (spec == specs.end())
      continue; // named tensor argument, handled by the caller
    if (!given.insert(a.name).second) {
      error(a.loc, "'" + a.name + "' is given twice");
      ok = false;
      continue;
    }
    if (spec->text || a.value->kind == Expr::Kind::String) {
      ok &= readTextSetting(a, *spec, env, n, callee);
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
      error(a.value->loc,
            formatv("'{0}' of {1} must be an integer", a.name, callee));
      ok = false;
      continue;
    }
    if (v->number < spec->min || v->number > spec->max) {
      error(a.value->loc,
            formatv("'{0}' of {1} must be between {2} and {3}, got {4}", a.name,
                    callee, formatNumber(spec->min), formatNumber(spec->max),
                    formatNumber(v->number)));
      ok = false;
      continue;
    }
    n.attrs.emplace_back(a.name, v->number);
  }
  for (const SettingSpec &s : specs) {
    if (given.count(s.name) || s.optional)
      continue;
    if (s.required) {
      error(call.loc, formatv("{0} needs '{1} = {2}'", callee, s.name,
                              s.text ? "\"...\"" : "..."));
      ok = false;
      continue;
    }
    n.attrs.emplace_back(s.name, s.fallback);
  }
  return ok;
}

bool Sema::readTextSetting(const Arg &a, const SettingSpec &spec,
                           llvm::StringMap<Local> &env, Node &n,
                           StringRef callee) {
  const Expr &e = *a.value;
  if (!spec.text) { // a string where a number is needed
    double x = 0;
    bool numeric = !e.text.empty() && !StringRef(e.text).getAsDouble(x);
    error(e.loc,
          formatv("'{0}' of {1} is a number, not a string{2}", a.name, callee,
                  numeric ? "; write it without quotes: '" + a.name + " = " +
                                e.text + "'"
                          : std::string()));
    return false;
  }
  if (e.kind != Expr::Kind::String) {
    std::string what = "a number";
    if (e.kind == Expr::Kind::Bool)
      what = "'true' or 'false'";
    else if (e.kind == Expr::Kind::List)
      what = "a list";
    else if (e.kind == Expr::Kind::Call)
      what = "a call";
    else if (e.kind == Expr::Kind::Name || e.kind == Expr::Kind::Field) {
      auto v = evalValue(e, env);
      if (!v)
        return false;
      what = describe(*v);
    }
    error(e.loc, formatv("'{0}' of {1} is a string in double quotes, not "
                         "{2}; write '{0} = \"...\"'",
                         a.name, callee, what));
    return false;
  }
  if (e.text.empty()) {
    error(e.loc, formatv("'{0}' of {1} is empty; give {2}", a.name, callee,
                         spec.help));
    return false;
  }
  n.textAttrs.emplace_back(a.name, e.text);
  return true;
}

std::optional<Node> Sema::checkMethodCall(const Expr &call,
                                          llvm::StringMap<Local> &env) {
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
    error(callee.loc,
          formatv("model '{0}' has no method '{1}' (methods are "
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
    if (!a.name.empty() &&
        !llvm::any_of(spec->settings,
                      [&](const SettingSpec &s) { return a.name == s.name; })) {
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
    d.attachNote(mlir::Location(model.loc))
        << "'" << model.name << "' " << what;
  };

  switch (spec->kind) {
  case Node::Kind::Generate: {
    if (model.head == Head::Value) {
      modelNote(
          error(callee.loc, formatv("cannot generate with '{0}': it has a "
                                    "value head, which scores sequences "
                                    "instead of predicting tokens",
                                    model.name)),
          "is declared with 'head = value' here");
      return std::nullopt;
    }
    auto t =
        expectTensor(*in, inExpr, TensorKind::Tokens, "prompt", calleeName);
    if (!t)
      return std::nullopt;
    if (t->field != "prompt") {
      error(inExpr.loc,
            formatv("{0} needs prompt token ids, but '{1}' holds "
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
      modelNote(
          error(call.loc, formatv("prompt length {0} plus max_new_tokens "
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
      modelNote(
          error(inExpr.loc, formatv("sequences of {0} tokens exceed the {1} "
                                    "positions of '{2}'",
                                    S, model.arch.maxSeq, model.name)),
          "is declared here");
      return std::nullopt;
    }
    n.result.fields = {{"seq", t->type}};
    if (model.head == Head::LM) {
      n.result.fields.push_back(
          {"logprobs", {TensorKind::Logprobs, DType::F32, {N, S}}});
    } else {
      n.result.fields.push_back(
          {"values", {TensorKind::Values, DType::F32, {N, S}}});
      n.result.fields.push_back(
          {"score", {TensorKind::Score, DType::F32, {N}}});
    }
    return n;
  }
  case Node::Kind::Train: {
    if (!model.trainable) {
      modelNote(error(callee.loc,
                      formatv("cannot train '{0}': it is frozen", model.name)),
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
      modelNote(
          error(inExpr.loc,
                formatv("loss '{0}' reads {1} head, but "
                        "'{2}' has {3} head",
                        lossNode.builtin,
                        fnHead(*lossNode.fn) == Head::LM ? "an lm" : "a value",
                        model.name,
                        model.head == Head::LM ? "an lm" : "a value")),
          "is declared here");
      return std::nullopt;
    }
    if (loss && loss->lossHead && *loss->lossHead != model.head) {
      modelNote(error(inExpr.loc,
                      formatv("'{0}' trains a model with {1} head, "
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
        modelNote(
            error(inExpr.loc,
                  formatv("sequences of {0} tokens exceed the "
                          "{1} positions of '{2}'",
                          li.type.shape[1], model.arch.maxSeq, model.name)),
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
    if (fnLoss) // the loss function's metrics follow its loss
      for (size_t k = 1; k < current->nodes[in->producer].fn->outputs.size();
           ++k)
        n.result.fields.push_back(
            {current->nodes[in->producer].fn->outputs[k].first,
             {TensorKind::Number, DType::F32, {}}});
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
      modelNote(
          error(inExpr.loc, formatv("cannot average '{0}' into '{1}': one has "
                                    "an lm head and the other a value head",
                                    src.name, model.name)),
          "is declared here");
      return std::nullopt;
    }
    if (src.arch.paramCount(src.head == Head::Value) !=
            model.arch.paramCount(model.head == Head::Value) ||
        src.arch.layers != model.arch.layers ||
        src.arch.hidden != model.arch.hidden) {
      modelNote(
          error(inExpr.loc, formatv("cannot average '{0}' into '{1}': their "
                                    "architectures differ",
                                    src.name, model.name)),
          "is declared here");
      return std::nullopt;
    }
    if (!src.trainable)
      warning(inExpr.loc, "'" + src.name +
                              "' is never trained, so averaging "
                              "it changes nothing");
    n.source = &src;
    return n;
  }
  default:
    return std::nullopt;
  }
}

std::optional<Node::Input> Sema::expectTensor(const Value &v, const Expr &at,
                                              TensorKind k, StringRef name,
                                              StringRef callee) {
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
      error(at.loc,
            formatv("{0} is ambiguous for '{1}' of {2}: it has several "
                    "{3} fields; name one, e.g. '{4}.{5}'",
                    v.origin.empty() ? "this record" : "'" + v.origin + "'",
                    name, callee, tensorKindNoun(k), v.origin, pick->name));
      return std::nullopt;
    }
    if (!pick) {
      auto d = error(at.loc, formatv("'{0}' of {1} needs {2}, but {3} has none",
                                     name, callee, tensorKindNoun(k),
                                     v.origin.empty() ? describe(v)
                                                      : "'" + v.origin + "' " +
                                                            v.record.str()));
      if (v.defLoc && !v.origin.empty())
        d.attachNote(mlir::Location(v.defLoc))
            << "'" << v.origin << "' is defined here";
      return std::nullopt;
    }
    return Node::Input{name.str(), v.producer, pick->name, pick->type};
  }
  if (v.kind != Value::Tensor || v.tensor.kind != k) {
    auto d = error(at.loc, formatv("'{0}' of {1} needs {2}, but got {3}", name,
                                   callee, tensorKindNoun(k), describe(v)));
    if (v.kind == Value::Tensor && v.defLoc && !v.origin.empty())
      d.attachNote(mlir::Location(v.defLoc))
          << "'" << v.origin << "' is defined here";
    return std::nullopt;
  }
  return Node::Input{name.str(), v.producer, v.field, v.tensor};
}

std::optional<Node> Sema::checkBuiltinCall(const Expr &call,
                                           llvm::StringMap<Local> &env) {
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
        error(a.loc,
              formatv("{0} takes {1} input{2} {3}{4}", calleeName,
                      spec->inputs.size(), spec->inputs.size() == 1 ? "" : "s",
                      spec->signature,
                      settings.empty()
                          ? std::string()
                          : "; its settings (" + settings +
                                ") are named, e.g. '" +
                                spec->settings.front().name + " = ...'"));
        return std::nullopt;
      }
      tensorArgs[pos++] = &a;
      continue;
    }
    auto in = llvm::find_if(
        spec->inputs, [&](const InputSpec &s) { return a.name == s.name; });
    if (in != spec->inputs.end()) {
      size_t idx = in - spec->inputs.begin();
      if (tensorArgs[idx]) {
        error(a.loc, "'" + a.name + "' is given twice");
        return std::nullopt;
      }
      tensorArgs[idx] = &a;
      continue;
    }
    if (!llvm::any_of(spec->settings,
                      [&](const SettingSpec &s) { return a.name == s.name; })) {
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
      error(call.loc,
            formatv("{0} is missing its '{1}' input; it takes {2}", calleeName,
                    spec->inputs[i].name, spec->signature));
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
        auto d = error(
            ex.loc, formatv("'{0}' of {1} needs a field '{2}' with {3}, "
                            "but '{4}' is {5}",
                            is.name, calleeName, fname2, tensorKindNoun(kind),
                            v->origin, v->record.str()));
        if (v->defLoc && !v->origin.empty())
          d.attachNote(mlir::Location(v->defLoc))
              << "'" << v->origin << "' is defined here";
        return std::nullopt;
      }
      n.inputs.push_back(
          Node::Input{is.name + "." + fname2, v->producer, fname2, f->type});
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
    bool repeats =
        (in.producer < 0 && b % a == 0) || (first->producer < 0 && a % b == 0);
    if (a != b && !repeats) {
      error(call.loc,
            formatv("inputs of {0} disagree on the batch: '{1}' has {2} "
                    "rows but '{3}' has {4}",
                    calleeName, first->param, first->type.batch(), in.param,
                    in.type.batch()));
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
    error(call.loc,
          formatv("batch of {0} sequences does not split into groups of "
                  "{1}; generate with 'n = {1}' so every prompt has a "
                  "full group",
                  N, g));
    return std::nullopt;
  }
  n.result = spec->result(N, S);
  return n;
}

void Sema::checkAnnotation(const Annotation &an, Node &n,
                           llvm::StringMap<Local> &env) {
  if (an.name != "place") {
    error(an.loc, "unknown annotation '@" + an.name +
                      "'; the only one is "
                      "'@place(mesh = c[0:8], dp = 2, tp = 4, pp = 1)'");
    return;
  }
  if (n.kind == Node::Kind::Host) {
    error(an.loc,
          "'@place' pins model calls; host functions run on the controller");
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
        error(base->loc,
              "mesh must be a cluster or a slice of one, such as c[0:8]");
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
        error(a.value->loc,
              formatv("mesh [{0}:{1}] is not a non-empty range of "
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
      error(a.loc,
            "'@place' settings are named: write 'mesh = c[0:8]', 'dp = 2'...");
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
    error(an.loc,
          formatv("dp*tp*pp = {0}*{1}*{2} = {3}, but the mesh has {4} "
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
    error(an.loc, formatv("the tensor-parallel group of GPUs [{0}:{1}] spans "
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
    error(pl.offloadLoc, formatv("'{0}' is trainable and cannot be offloaded; "
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
