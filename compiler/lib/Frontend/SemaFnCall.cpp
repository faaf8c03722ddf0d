//===- SemaFnCall.cpp - calls of functions written in the language --------===//
//
// Binds an algorithm's arguments to a function's parameters (a record
// passed by position fills the parameters named like its fields) and
// instantiates the body for them (FnCheck.h).
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

#include "llvm/Support/SaveAndRestore.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

std::optional<FnControl>
Sema::checkAdaptiveControl(const Expr &call, llvm::StringMap<Local> &env) {
  const ControlSpec &spec = *lookupControl(call.base->text);
  const std::string fname = spec.spec.name;
  FnControl c;
  c.kind =
      fname == "adaptive_kl" ? FnControl::Kind::Kl : FnControl::Kind::Entropy;
  llvm::ArrayRef<SettingSpec> params = spec.params;
  std::vector<std::string> names;
  std::vector<double> v;
  for (const SettingSpec &p : params) {
    names.push_back(p.name);
    v.push_back(p.fallback);
  }
  const std::string usage = "'" + fname + "' takes " + spec.usage;
  std::vector<const Expr *> given(names.size(), nullptr);
  size_t pos = 0;
  for (const Arg &a : call.args) {
    size_t k = 0;
    if (a.name.empty()) {
      if (pos >= names.size()) {
        error(a.loc, "too many arguments: " + usage);
        return std::nullopt;
      }
      k = pos++;
    } else {
      auto it = llvm::find(names, a.name);
      if (it == names.end()) {
        error(a.loc, "'" + fname + "' has no parameter '" + a.name + "'" +
                         didYouMean(a.name, names));
        return std::nullopt;
      }
      k = size_t(it - names.begin());
    }
    if (given[k]) {
      error(a.loc, "'" + names[k] + "' is given twice");
      return std::nullopt;
    }
    given[k] = a.value.get();
    auto val = evalValue(*a.value, env);
    if (!val)
      return std::nullopt;
    if (val->kind != Value::Number || val->dim != UnitDim::None) {
      error(a.value->loc,
            "'" + names[k] + "' of '" + fname + "' is a plain number, not " +
                (val->kind == Value::Number ? unitDimName(val->dim).str()
                                            : describe(*val)));
      return std::nullopt;
    }
    v[k] = val->number;
  }
  for (size_t k = 0; k < names.size(); ++k)
    if (params[k].required && !given[k]) {
      error(call.loc, "missing argument '" + names[k] + "': " + usage);
      return std::nullopt;
    }
  // A bad value was given (the defaults are good): point at it.
  auto bad = [&](size_t k, const std::string &what) {
    error(given[k] ? given[k]->loc : call.loc,
          formatv("{0} of '{1}' {2}, got {3}", names[k], fname, what,
                  formatNumber(v[k])));
    return std::nullopt;
  };
  c.init = v[0];
  c.target = v[1];
  if (c.kind == FnControl::Kind::Kl) {
    // A multiplicative controller never leaves 0.
    if (!(v[0] > 0))
      return bad(0, "is the coefficient to start from and must be above 0");
    if (!(v[1] > 0))
      return bad(1, "is the KL to hold and must be above 0");
    if (!(v[2] >= 1))
      return bad(2, "counts rows and must be at least 1");
    c.horizon = v[2];
    return c;
  }
  c.delta = v[2];
  c.max = v[3];
  c.min = v[4];
  if (!(c.target > 0))
    return bad(1, "is the entropy to hold and must be above 0");
  if (!(c.delta > 0))
    return bad(2, "is the step of the coefficient and must be above 0");
  if (!(c.min >= 0))
    return bad(4, "bounds an entropy bonus, which is not negative");
  if (!(c.max >= c.min))
    return bad(3, "must be at least min (" + formatNumber(c.min) + ")");
  if (!(c.init >= c.min && c.init <= c.max))
    return bad(0, "must lie within [min, max] = [" + formatNumber(c.min) +
                      ", " + formatNumber(c.max) + "]");
  return c;
}

std::optional<Node> Sema::checkFnCall(const Expr &call, const ast::FnDecl &fn,
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
  // 'ppo_actor_loss(g, adv)' binds g.seq and g.logprobs), but leaves a
  // parameter for each tensor argument after it (so 'gae(r, v, lp, lr)'
  // binds r's score alone, though r has values too).
  // adaptive_kl(...) and adaptive_entropy(...) arguments, by the
  // expression given.
  std::map<const Expr *, FnControl> adaptive;
  auto argValue = [&](const Expr &e) -> std::optional<Value> {
    if (!isAdaptiveControl(e))
      return evalValue(e, env);
    auto c = checkAdaptiveControl(e, env);
    if (!c)
      return std::nullopt;
    adaptive[&e] = *c;
    Value v;
    v.kind = Value::Number;
    v.number = c->init;
    v.origin = std::string(c->name()) + "(...)";
    return v;
  };
  std::vector<std::optional<Value>> positional;
  for (const Arg &a : call.args)
    if (a.name.empty()) {
      auto v = argValue(*a.value);
      if (!v)
        return std::nullopt;
      positional.push_back(std::move(v));
    }
  auto tensorArgsAfter = [&](size_t k) {
    return size_t(std::count_if(positional.begin() + k + 1, positional.end(),
                                [](const std::optional<Value> &v) {
                                  return v->kind != Value::Number;
                                }));
  };
  auto tensorParamsFrom = [&](size_t i) {
    size_t n = 0;
    for (; i < np; ++i)
      n += isTensor(i);
    return n;
  };
  std::vector<std::optional<Value>> vals(np);
  std::vector<const Expr *> exprs(np, nullptr);
  std::vector<bool> byName(np, false);
  // Where a record filled several parameters, later positional arguments
  // shift: say so on errors about them.
  const Expr *spreadArg = nullptr;
  std::string spreadParams, spreadFirst;
  auto explainShift = [&](mlir::InFlightDiagnostic &&d) {
    if (spreadArg)
      d.attachNote(spreadArg->loc)
          << "this record filled " << spreadParams
          << " from its fields, so the arguments after it moved on; pass "
             "one field (e.g. '"
          << (spreadArg->kind == Expr::Kind::Name ? spreadArg->text
                                                  : std::string("r"))
          << "." << spreadFirst << "') to fill one parameter";
  };
  size_t pos = 0, k = 0;
  for (const Arg &a : call.args) {
    if (a.name.empty()) {
      if (pos >= np) {
        error(a.loc, "too many arguments: " + sig);
        return std::nullopt;
      }
      const std::optional<Value> &v = positional[k];
      size_t room = tensorParamsFrom(pos), after = tensorArgsAfter(k++);
      size_t most = room > after ? room - after : 1;
      bool spread = false;
      size_t first = pos;
      if (v->kind == Value::Record || v->kind == Value::Dataset)
        while (pos < np && pos - first < most && isTensor(pos) && !exprs[pos] &&
               v->record.find(fn.params[pos].name)) {
          vals[pos] = v;
          exprs[pos] = a.value.get();
          byName[pos++] = spread = true;
        }
      if (pos - first > 1) {
        spreadArg = a.value.get();
        spreadFirst = fn.params[first].name;
        spreadParams.clear();
        for (size_t i = first; i < pos; ++i)
          spreadParams += (i > first ? (i + 1 == pos ? " and '" : ", '")
                                     : std::string("'")) +
                          fn.params[i].name + "'";
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
      explainShift(error(a.loc, "'" + a.name + "' is given twice"));
      return std::nullopt;
    }
    auto v = argValue(*a.value);
    if (!v)
      return std::nullopt;
    vals[idx] = v;
    exprs[idx] = a.value.get();
  }
  Node n{Node::Kind::Host, "", call.loc};
  n.builtin = fn.name;
  std::vector<FnArg> args;
  // The dimensions bound to each tensor parameter choose the overload.
  std::vector<std::optional<size_t>> ranks(np);
  std::vector<std::string> origins(np);
  for (size_t i = 0; i < np; ++i) {
    const ast::FnParam &prm = fn.params[i];
    FnArg arg;
    if (!exprs[i]) {
      if (!prm.fallback) {
        error(call.loc, "missing argument '" + prm.name + "': " + sig);
        return std::nullopt;
      }
      // A default is the function's own constant: no algorithm's names.
      llvm::SaveAndRestore<llvm::StringMap<Local> *> scope(numberScope,
                                                           nullptr);
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
    if (auto ctl = adaptive.find(&ex); ctl != adaptive.end()) {
      const FnControl &c = ctl->second;
      const char *why = isTensor(i) ? "takes a tensor"
                        : prm.type.kind == "int"
                            ? "is an int, fixed before the run"
                            : nullptr;
      if (why) {
        explainShift(error(ex.loc, formatv("'{0}' of {1} {2}; {3} gives a "
                                           "number the run adapts",
                                           prm.name, callee, why, c.name())));
        return std::nullopt;
      }
      if (llvm::any_of(args, [&](const FnArg &a) {
            return a.control && a.control->kind == c.kind;
          })) {
        error(ex.loc, formatv("{0} is given a second {1}; one call adapts "
                              "one such coefficient, to its '{2}'",
                              callee, c.name(), c.metric()));
        return std::nullopt;
      }
      arg.control = c;
      arg.number = c.init;
      args.push_back(arg);
      continue;
    }
    if (!isTensor(i)) {
      if (v.kind != Value::Number || v.dim != UnitDim::None) {
        explainShift(error(
            ex.loc,
            formatv("'{0}' of {1} is a plain number, not {2}", prm.name, callee,
                    v.kind == Value::Number ? unitDimName(v.dim).str()
                                            : describe(v))));
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
    } else if (v.kind == Value::Tensor && v.tensor.kind != TensorKind::Tokens &&
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
    ranks[i] = t->type.shape.size();
    origins[i] =
        v.origin.empty() ? std::string("the argument") : "'" + v.origin + "'";
    arg.tensor = t->type;
    n.inputs.push_back(*t);
    args.push_back(arg);
  }
  // Each call moves the coefficient by at most 20% of rows / horizon: more
  // than all of it would turn it negative.
  for (const FnArg &a : args) {
    if (!a.control || a.control->kind != FnControl::Kind::Kl)
      continue;
    auto t = llvm::find_if(args, [](const FnArg &x) { return x.tensor; });
    int64_t rows = t != args.end() ? t->tensor->batch() : 1;
    if (a.control->horizon <= 0.2 * double(rows)) {
      error(a.loc,
            formatv("with {0} rows per call, a horizon of {1} could scale "
                    "the coefficient by 1 - 0.2 * {0} / {1}, which is not "
                    "above 0; use a horizon above {2} (TRL and verl use "
                    "10000)",
                    rows, formatNumber(a.control->horizon),
                    formatNumber(0.2 * double(rows))));
      return std::nullopt;
    }
  }
  const ast::FnDecl *chosen = fns.pick(fn.name, ranks);
  if (!chosen) {
    if (!fns.overloaded(fn.name)) {
      // One declaration: name the parameter whose shape is wrong.
      for (size_t i = 0; i < np; ++i) {
        const ast::FnParam &prm = fn.params[i];
        if (!ranks[i] || *ranks[i] == prm.type.dims.size())
          continue;
        error(exprs[i]->loc,
              formatv("'{0}' of {1} is {2} {3}, but {4} is {5}", prm.name,
                      callee,
                      prm.type.dims.size() == 1 ? "per sequence" : "per token",
                      prm.type.dims.size() == 1 ? "[N]" : "[N, S]", origins[i],
                      args[i].tensor->str()));
        return std::nullopt;
      }
    }
    std::string shapes;
    for (size_t i = 0; i < np; ++i)
      if (ranks[i])
        shapes += (shapes.empty() ? "" : ", ") + fn.params[i].name +
                  (*ranks[i] == 1 ? " [N]" : " [N, S]");
    error(call.loc, formatv("no overload of {0} takes {1}; it is {2}", callee,
                            shapes, fns.candidates(fn.name)));
    return std::nullopt;
  }
  auto body = fns.instantiate(*chosen, args, call.loc, n.result);
  if (!body)
    return std::nullopt;
  n.fn = std::make_shared<const FnBody>(std::move(*body));
  return n;
}
