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
    bool fnLoss = producer && producer->fn && producer->fn->loss;
    if (!fnLoss) {
      error(inExpr.loc, formatv("{0} takes a loss, such as "
                                "'ppo_actor_loss(g, adv)', but got {1}",
                                calleeName, describe(*in)));
      return std::nullopt;
    }
    const Node &lossNode = current->nodes[in->producer];
    if (fnHead(*lossNode.fn) != model.head) {
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
      // Scores and values come from a value head: point at the model
      // (often in the user's file when the algorithm is the stdlib's).
      if ((k == TensorKind::Score || k == TensorKind::Values) &&
          v.producer >= 0 && size_t(v.producer) < current->nodes.size()) {
        const Node &src = current->nodes[size_t(v.producer)];
        if (src.kind == Node::Kind::Inference && src.model &&
            src.model->head != Head::Value && src.model->loc)
          d.attachNote(mlir::Location(src.model->loc))
              << "'" << src.model->name << "' has an lm head; "
              << (k == TensorKind::Score ? "a reward model scores sequences"
                                         : "a critic gives per-token values")
              << " with 'head = value;' in its declaration";
      }
      return std::nullopt;
    }
    return Node::Input{name.str(), v.producer, pick->name, pick->type,
                       v.dataset};
  }
  if (v.kind != Value::Tensor || v.tensor.kind != k) {
    auto d = error(at.loc, formatv("'{0}' of {1} needs {2}, but got {3}", name,
                                   callee, tensorKindNoun(k), describe(v)));
    if (v.kind == Value::Tensor && v.defLoc && !v.origin.empty())
      d.attachNote(mlir::Location(v.defLoc))
          << "'" << v.origin << "' is defined here";
    return std::nullopt;
  }
  return Node::Input{name.str(), v.producer, v.field, v.tensor, v.dataset};
}

std::optional<Node> Sema::checkBuiltinCall(const Expr &call,
                                           llvm::StringMap<Local> &env) {
  const std::string &fname = call.base->text;
  const BuiltinSpec *spec = lookupBuiltin(fname);
  // Functions of the program, its imports and the prelude come first.
  if (const ast::FnDecl *fn = fns.find(fname))
    return checkFnCall(call, *fn, env);
  if (!spec) {
    if (const ControlSpec *c = lookupControl(fname)) {
      error(call.base->loc,
            formatv("{0}(...) is {1}, given for a number parameter of a "
                    "function's call, as in '{2}'",
                    fname, c->what, c->example));
      return std::nullopt;
    }
    if (lookupFnPrimitive(fname)) {
      error(call.base->loc, "'" + fname +
                                "' works inside functions; write "
                                "an 'fn' that uses it and call that");
      return std::nullopt;
    }
    if (env.count(fname) || symbols.count(fname))
      error(call.base->loc, "'" + fname + "' is not a function");
    else
      unknownFunction(call.base->loc, fname, didYouMean(fname, builtinNames()));
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
    auto t = expectTensor(*v, ex, is.kind, is.name, calleeName);
    if (!t)
      return std::nullopt;
    n.inputs.push_back(*t);
  }
  // The reward functions score responses, which only generated sequences
  // (a generate's seq, passed on by an inference) mark.
  const bool scoresResponses =
      fname == "exact_match" || fname == "script_reward";
  if (scoresResponses && !n.inputs.empty() &&
      (n.inputs[0].producer < 0 || n.inputs[0].field != "seq")) {
    const Node::Input &in = n.inputs[0];
    error(tensorArgs[0]->value->loc,
          formatv("{0} scores generated responses, so its 'seq' must be a "
                  "generate's 'seq' (as in 'g.seq'), not {1}",
                  calleeName,
                  in.producer < 0 ? std::string("a dataset column")
                                  : "the '" + in.field + "' of a result"));
    return std::nullopt;
  }
  // Answers pair with samples by row: they must be the answers of the
  // prompts sampled, not of another dataset's.
  if (scoresResponses && n.inputs.size() == 2 && n.inputs[1].dataset) {
    std::vector<int> gens =
        generatesFeeding(current->nodes, {n.inputs[0].producer});
    const Node *gen =
        gens.size() == 1 ? &current->nodes[size_t(gens[0])] : nullptr;
    const Dataset *prompts =
        gen && !gen->inputs.empty() ? gen->inputs[0].dataset : nullptr;
    if (prompts && prompts != n.inputs[1].dataset) {
      error(tensorArgs[1]->value->loc,
            formatv("'{0}' scores samples of the prompts of dataset '{1}' "
                    "against the answers of dataset '{2}': rows would pair "
                    "by position across datasets; give the answers of '{1}'",
                    fname, prompts->name, n.inputs[1].dataset->name))
              .attachNote(mlir::Location(gen->loc))
          << "the samples are generated here";
      return std::nullopt;
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
  n.result = spec->result(N, S);
  return n;
}
