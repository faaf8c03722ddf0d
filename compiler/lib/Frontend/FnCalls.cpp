//===- FnCalls.cpp - calls inside function bodies -------------------------===//
//
// Calls of other functions (inlined, with their parameters checked) and of
// the primitives of the sublanguage (Builtins.h's allFnPrimitives).
//
//===----------------------------------------------------------------------===//

#include "FnEval.h"

#include "rlhfc/Frontend/Builtins.h"
#include "rlhfc/Frontend/Units.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using ast::Expr;
using ast::FnDecl;
using llvm::formatv;
using llvm::StringRef;

std::optional<FnVal>
FnEval::bindParam(const FnDecl &callee, const ast::FnParam &p, FnVal v,
                  mlir::Location at, std::map<std::string, std::string> &dims) {
  std::string what = "'" + p.name + "' of '" + callee.name + "'";
  if (FnChecker::isNumber(p.type) && p.type.dims.empty()) {
    if (v.rank != FnRank::Scalar) {
      fail(at, what + " is a number, but got " + shapeText(v));
      return std::nullopt;
    }
    if (p.type.kind == "int" && !integer(v, what, 0, 0, at))
      return std::nullopt;
    v.kind.reset();
    return v;
  }
  std::optional<TensorKind> kind = FnChecker::kindOf(p.type);
  FnRank want =
      kind == TensorKind::Tokens ? FnRank::Tokens : FnRank(p.type.dims.size());
  std::string declared =
      p.type.kind + "[" + llvm::join(p.type.dims, ", ") + "]";
  if (v.rank != want) {
    fail(at, what + " is " + declared + ", but got " + shapeText(v));
    return std::nullopt;
  }
  if (kind && v.kind && *v.kind != *kind && want != FnRank::Tokens) {
    fail(at, formatv("{0} takes {1}, but got {2}", what, tensorKindNoun(*kind),
                     tensorKindNoun(*v.kind)));
    return std::nullopt;
  }
  for (size_t i = 0; i < p.type.dims.size(); ++i) {
    auto [it, fresh] = dims.try_emplace(p.type.dims[i], v.dims[i]);
    if (!fresh && it->second != v.dims[i]) {
      fail(at,
           formatv("dimension '{0}' of '{1}' is '{2}' for '{3}' but '{4}' "
                   "for an earlier parameter",
                   p.type.dims[i], callee.name, v.dims[i], p.name, it->second));
      return std::nullopt;
    }
  }
  if (kind)
    v.kind = kind;
  return v;
}

std::optional<FnVal> FnEval::userCall(const Expr &e, const FnDecl &first) {
  // Match arguments to parameters (the overloads share them): positional
  // first, then by name.
  std::string sig = "'" + first.name + FnChecker::signature(first) + "'";
  if (c.overloaded(first.name))
    sig = c.candidates(first.name);
  std::vector<const ast::Arg *> given(first.params.size(), nullptr);
  size_t pos = 0;
  bool named = false;
  for (const ast::Arg &a : e.args) {
    size_t idx;
    if (a.name.empty()) {
      if (named) {
        fail(a.loc, "positional argument after a named one");
        return std::nullopt;
      }
      if (pos >= first.params.size()) {
        fail(a.loc, formatv("'{0}' takes {1} argument{2}: {3}", first.name,
                            first.params.size(),
                            first.params.size() == 1 ? "" : "s", sig));
        return std::nullopt;
      }
      idx = pos++;
    } else {
      named = true;
      auto it = llvm::find_if(first.params, [&](const ast::FnParam &p) {
        return p.name == a.name;
      });
      if (it == first.params.end()) {
        fail(a.loc, "'" + first.name + "' has no parameter '" + a.name +
                        "'; it takes " + sig);
        return std::nullopt;
      }
      idx = size_t(it - first.params.begin());
      if (given[idx]) {
        fail(a.loc, "'" + a.name + "' is given twice");
        return std::nullopt;
      }
    }
    given[idx] = &a;
  }
  // The values, then the overload their shapes choose.
  std::vector<std::optional<FnVal>> vals(first.params.size());
  std::vector<std::optional<size_t>> ranks(first.params.size());
  for (size_t i = 0; i < first.params.size(); ++i) {
    const ast::FnParam &p = first.params[i];
    if (given[i]) {
      vals[i] = expr(*given[i]->value);
      if (!vals[i])
        return std::nullopt;
      if (!(FnChecker::isNumber(p.type) && p.type.dims.empty()) &&
          vals[i]->rank != FnRank::Scalar)
        ranks[i] = vals[i]->dims.size();
    } else if (p.fallback) {
      vals[i] = expr(*p.fallback);
    } else {
      fail(e.loc, "missing argument '" + p.name + "' of '" + first.name +
                      "'; it takes " + sig);
      return std::nullopt;
    }
  }
  const FnDecl *picked = c.pick(first.name, ranks);
  if (!picked) {
    if (!c.overloaded(first.name)) {
      picked = &first; // one declaration: bindParam names the parameter
    } else {
      fail(e.loc, "no overload of '" + first.name +
                      "' takes these shapes; it is " + sig);
      return std::nullopt;
    }
  }
  const FnDecl &callee = *picked;
  for (const Frame &f : stack)
    if (f.decl == &callee) {
      fail(e.base->loc,
           "'" + callee.name + "' calls itself" +
               (stack.back().decl == &callee
                    ? std::string()
                    : " through '" + stack.back().decl->name + "'") +
               "; functions are inlined, so they cannot recurse");
      return std::nullopt;
    }
  if (c.states[&callee] == FnChecker::State::InProgress) {
    // The callee's own check is under way further up: a cycle.
    fail(e.base->loc, "'" + callee.name + "' calls itself through '" +
                          stack.back().decl->name +
                          "'; functions are inlined, so they cannot recurse");
    return std::nullopt;
  }
  if (!c.valid(callee)) {
    failed = true; // reported in the callee
    return std::nullopt;
  }
  // A loss called inside another gives its loss; its metrics are dropped.
  if (callee.results.size() != 1 && !FnChecker::isLoss(callee)) {
    fail(e.base->loc, formatv("'{0}' returns {1} values; only a function of "
                              "one result can be called inside another",
                              callee.name, callee.results.size()));
    return std::nullopt;
  }
  if (FnChecker::isLoss(callee) && !loss) {
    fail(e.base->loc, "'" + callee.name +
                          "' is a loss; call it from a loss, or pass it to "
                          "a model's train");
    return std::nullopt;
  }
  std::vector<FnVal> args;
  std::map<std::string, std::string> dims;
  for (size_t i = 0; i < callee.params.size(); ++i) {
    mlir::Location at = given[i] ? given[i]->loc : e.loc;
    std::optional<FnVal> v = vals[i];
    if (v)
      v = bindParam(callee, callee.params[i], *v, at, dims);
    if (!v)
      return std::nullopt;
    args.push_back(*v);
  }
  // Checking, a callee's result depends only on what is known of its
  // arguments: check each combination once.
  std::string key;
  if (generic) {
    llvm::raw_string_ostream os(key);
    os << callee.name << (loss ? "/loss" : "/host");
    for (const FnVal &a : args) {
      os << "|" << int(a.rank) << ":" << llvm::join(a.dims, ",") << ":"
         << (a.kind ? int(*a.kind) : -1) << ":" << a.number << a.model << a.cut
         << a.reduced << a.input << ":";
      if (a.constant)
        os << *a.constant;
    }
    if (auto it = checked.find(key); it != checked.end()) {
      if (!it->second)
        failed = true;
      return it->second;
    }
  }
  bool before = failed;
  failed = false;
  auto out = body(callee, std::move(args), std::move(dims), e.loc);
  std::optional<FnVal> result;
  if (out && !failed)
    result = out->front();
  failed |= before;
  if (generic)
    checked[key] = result;
  return result;
}

std::optional<FnVal> FnEval::primitive(const Expr &e, StringRef name) {
  const FnPrimitiveSpec &spec = *lookupFnPrimitive(name);
  std::string what = "'" + name.str() + "'";
  // Positional arguments, plus `correction` by name for variances.
  bool spread = (name.ends_with("_var") || name.ends_with("_std")) &&
                !name.starts_with("running_");
  size_t arity =
      name == "where" || name == "clamp" || name == "discounted_cumsum" ? 3
      : name.starts_with("seq_") || name.starts_with("token_") ||
              name.starts_with("group_") || name == "min" || name == "max" ||
              name == "broadcast"
          ? 2
          : 1;
  // next(x) or next(x, mask).
  size_t minArity = arity;
  if (name == "next")
    arity = 2;
  std::vector<FnVal> args;
  std::optional<FnVal> correction;
  for (const ast::Arg &a : e.args) {
    if (!a.name.empty()) {
      if (a.name != "correction" || !spread) {
        fail(a.loc, what + " has no parameter '" + a.name + "'; it takes " +
                        spec.signature);
        return std::nullopt;
      }
      correction = expr(*a.value);
      if (!correction)
        return std::nullopt;
      continue;
    }
    if (args.size() == arity && spread && !correction) {
      correction = expr(*a.value);
      if (!correction)
        return std::nullopt;
      continue;
    }
    if (args.size() >= arity) {
      fail(a.loc, formatv("{0} takes {1} argument{2}: {3}", what, arity,
                          arity == 1 ? "" : "s", spec.signature));
      return std::nullopt;
    }
    auto v = expr(*a.value);
    if (!v)
      return std::nullopt;
    args.push_back(*v);
  }
  if (args.size() < minArity || args.size() > arity) {
    fail(e.loc, formatv("{0} takes {1} argument{2}: {3}", what,
                        minArity == arity
                            ? std::to_string(arity)
                            : formatv("{0} or {1}", minArity, arity).str(),
                        arity == 1 ? "" : "s", spec.signature));
    return std::nullopt;
  }
  int64_t corr = 1;
  if (correction) {
    auto k = integer(*correction, "the correction of " + what, 0, 1, e.loc);
    if (!k)
      return std::nullopt;
    corr = *k;
  }
  for (StringRef over : {"seq", "group", "batch", "token"})
    if (name.starts_with(over.str() + "_"))
      return reduction(e, over, name.drop_front(over.size() + 1), args, corr);
  if (name.starts_with("running_")) {
    const FnVal &x = args[0];
    if (loss) {
      fail(e.loc, what + " keeps statistics across calls, which only a host "
                         "function may do; compute them in a host function "
                         "before the train call");
      return std::nullopt;
    }
    if (x.rank != FnRank::Seq) {
      fail(e.args[0].loc, what +
                              " follows per-sequence values [N] over the "
                              "run, but got " +
                              shapeText(x));
      return std::nullopt;
    }
    FnVal v;
    v.id = emit(name, {x.id}, FnRank::Scalar, e.loc);
    return v;
  }

  FnVal v;
  auto combine = [&](std::initializer_list<const FnVal *> vs) {
    for (const FnVal *x : vs) {
      v.model |= x->model;
      v.cut |= x->cut;
      if (x->cut && !v.cutLoc)
        v.cutLoc = x->cutLoc;
    }
  };
  for (const FnVal &a : args)
    if (!notReduced(a, what, e.loc))
      return std::nullopt;

  if (args.size() == 1 && name != "mask_of" && name != "last" &&
      name != "next") {
    FnVal &x = args[0];
    if (!noTokens(x, what, e.loc))
      return std::nullopt;
    v.rank = x.rank;
    v.dims = x.dims;
    v.number = x.number;
    v.positive = name == "exp";
    combine({&x});
    // The value without its gradient: a loss must depend on the model
    // through something else.
    if (name == "stop_gradient" && (v.model || v.cut)) {
      if (v.model || !v.cutLoc)
        v.cutLoc = e.loc;
      v.model = false;
      v.cut = true;
    }
    v.id = emit(name, {x.id}, v.rank, e.loc);
    return v;
  }
  if (name == "min" || name == "max") {
    if (!sameShape({&args[0], &args[1]}, what, e.loc, v))
      return std::nullopt;
    // A cap at or below 0 on an exp (an importance weight's max_weight)
    // replaces every value: a sign slip that would train backwards.
    for (auto [x, cap] :
         {std::pair(&args[0], &args[1]), std::pair(&args[1], &args[0])})
      if (name == "min" && x->positive && cap->constant &&
          *cap->constant <= 0) {
        fail(e.loc, formatv("'min' caps a positive value (an exp) at {0}: "
                            "every value would become {0}; the cap must be "
                            "above 0",
                            formatNumber(*cap->constant)));
        return std::nullopt;
      }
    v.number = args[0].number && args[1].number;
    combine({&args[0], &args[1]});
    v.id = emit(name, {args[0].id, args[1].id}, v.rank, e.loc);
    return v;
  }
  if (name == "clamp") {
    if (!sameShape({&args[0], &args[1], &args[2]}, what, e.loc, v))
      return std::nullopt;
    if (args[1].rank != FnRank::Scalar && args[1].rank != args[0].rank) {
      fail(e.loc, "the bounds of 'clamp' are numbers or shaped like its value");
      return std::nullopt;
    }
    if (args[1].constant && args[2].constant &&
        *args[1].constant > *args[2].constant) {
      fail(e.loc, formatv("the lower bound of 'clamp' ({0}) is above its "
                          "upper bound ({1}): every value would become {1}; "
                          "swap them",
                          formatNumber(*args[1].constant),
                          formatNumber(*args[2].constant)));
      return std::nullopt;
    }
    combine({&args[0], &args[1], &args[2]});
    v.id = emit(name, {args[0].id, args[1].id, args[2].id}, v.rank, e.loc);
    return v;
  }
  if (name == "where") {
    FnVal &cond = args[0];
    if (!sameShape({&cond, &args[1], &args[2]}, what, e.loc, v))
      return std::nullopt;
    combine({&args[1], &args[2]});
    if (cond.model || cond.cut) {
      v.cut = true;
      if (!v.cutLoc)
        v.cutLoc = cond.model ? mlir::LocationAttr(e.args[0].loc) : cond.cutLoc;
    }
    v.id = emit(name, {cond.id, args[1].id, args[2].id}, v.rank, e.loc);
    return v;
  }
  if (name == "broadcast") {
    FnVal &x = args[0], &like = args[1];
    if (x.rank != FnRank::Seq || like.rank != FnRank::Token) {
      fail(e.loc, "'broadcast' repeats a per-sequence value [N] along the "
                  "sequence of a per-token one [N, S], but got " +
                      shapeText(x) + " and " + shapeText(like));
      return std::nullopt;
    }
    if (x.dims[0] != like.dims[0]) {
      fail(e.loc, "'broadcast' needs one batch: " + shapeText(x) + " and " +
                      shapeText(like));
      return std::nullopt;
    }
    v.rank = FnRank::Token;
    v.dims = like.dims;
    v.kind = x.kind;
    combine({&x});
    v.id = emit(name, {x.id, like.id}, v.rank, e.loc);
    return v;
  }
  if (name == "mask_of") {
    if (args[0].rank != FnRank::Tokens &&
        !(args[0].rank == FnRank::Token && args[0].input)) {
      fail(e.args[0].loc,
           "'mask_of' reads the mask of token ids or of a per-token "
           "parameter, as the call passed it; got " +
               (args[0].rank == FnRank::Token ? "a computed value"
                                              : shapeText(args[0])));
      return std::nullopt;
    }
    v.rank = FnRank::Token;
    v.dims = args[0].dims;
    v.kind = TensorKind::Mask;
    v.id = emit(name, {args[0].id}, v.rank, e.loc);
    return v;
  }
  // last, next, discounted_cumsum: per-token scans.
  for (const FnVal &a : args)
    if (!noTokens(a, what, e.loc))
      return std::nullopt;
  FnVal &x = args[0];
  if (x.rank != FnRank::Token) {
    fail(e.args[0].loc,
         what + " scans per-token values [N, S], but got " + shapeText(x));
    return std::nullopt;
  }
  v.rank = FnRank::Token;
  v.dims = x.dims;
  if (name == "last") {
    v.kind = TensorKind::Mask;
    if (x.model || x.cut) {
      v.cut = true;
      v.cutLoc = x.model ? mlir::LocationAttr(e.loc) : x.cutLoc;
    }
    v.id = emit(name, {x.id}, v.rank, e.loc);
    return v;
  }
  // A scan's mask: shaped like its value; a mask read from the model (or
  // computed from one) makes the result carry no gradient through it.
  auto scanMask = [&](const FnVal &mask, const ast::Arg &at) {
    if (mask.rank != FnRank::Token || mask.dims != x.dims) {
      fail(at.loc, "the mask of " + what + " must be shaped like its value " +
                       shapeText(x) + ", but is " + shapeText(mask));
      return false;
    }
    if (mask.model || mask.cut) {
      v.cut = true;
      if (!v.cutLoc)
        v.cutLoc = mask.model ? mlir::LocationAttr(at.loc) : mask.cutLoc;
    }
    return true;
  };
  if (name == "next") {
    combine({&x});
    if (args.size() == 2 && !scanMask(args[1], e.args[1]))
      return std::nullopt;
    std::vector<int> ids{x.id};
    if (args.size() == 2)
      ids.push_back(args[1].id);
    v.id = emit(name, ids, v.rank, e.loc);
    return v;
  }
  FnVal &discount = args[1], &mask = args[2];
  if (discount.rank != FnRank::Scalar) {
    fail(e.args[1].loc, "the discount of 'discounted_cumsum' is a number, "
                        "but got " +
                            shapeText(discount));
    return std::nullopt;
  }
  combine({&x, &discount});
  if (!scanMask(mask, e.args[2]))
    return std::nullopt;
  v.id = emit("rcumsum", {x.id, discount.id, mask.id}, v.rank, e.loc);
  return v;
}

std::optional<FnVal> FnEval::reduction(const Expr &e, StringRef over,
                                       StringRef stat, std::vector<FnVal> &args,
                                       int64_t correction) {
  std::string name = (over + "_" + stat).str();
  std::string what = "'" + name + "'";
  FnVal &x = args[0];
  if (!noTokens(x, what, e.loc) || !notReduced(x, what, e.loc))
    return std::nullopt;
  bool spread = stat == "var" || stat == "std";
  // A loss's sums and means over the batch add up across micro-batches (the
  // runtime divides by the batch's counts); spreads and extremes do not.
  bool extreme = stat == "max" || stat == "min";
  if (loss && (over == "group" || ((spread || extreme) && over != "seq"))) {
    fail(e.loc, what + " needs the whole batch at once, but a loss runs on "
                       "micro-batches; compute it in a host function and "
                       "pass the result in");
    return std::nullopt;
  }
  bool perToken = over == "seq" || over == "token";
  FnRank want = perToken ? FnRank::Token : FnRank::Seq;
  if (x.rank != want) {
    fail(e.args[0].loc, formatv("{0} reduces {1} values {2}, but got {3}", what,
                                perToken ? "per-token" : "per-sequence",
                                perToken ? "[N, S]" : "[N]", shapeText(x)));
    return std::nullopt;
  }
  FnVal v;
  v.model = x.model;
  v.cut = x.cut;
  v.cutLoc = x.cutLoc;
  std::vector<int> operands = {x.id};
  int64_t group = 0;
  if (perToken) {
    FnVal &mask = args[1];
    if (!notReduced(mask, what, e.loc))
      return std::nullopt;
    if (mask.rank != FnRank::Token || mask.dims != x.dims) {
      fail(e.args[1].loc, "the mask of " + what +
                              " must be shaped like its "
                              "value " +
                              shapeText(x) + ", but is " + shapeText(mask));
      return std::nullopt;
    }
    if (loss && (mask.model || mask.cut)) {
      fail(e.args[1].loc,
           "the mask of " + what +
               " depends on the trained model, but a loss needs its masks "
               "before the forward pass; take it from the batch, e.g. "
               "mask_of(seq)");
      return std::nullopt;
    }
    operands.push_back(mask.id);
  } else if (over == "group") {
    auto n = integer(args[1], "the group size of " + what, 1, 0, e.loc);
    if (!n)
      return std::nullopt;
    group = *n;
    // A group's variance divides by G - correction, which must stay >= 1.
    if (group && spread && correction >= group) {
      fail(e.loc, formatv("{0} over groups of {1} with correction {2} "
                          "divides by {1} - {2}; groups need more samples "
                          "than the correction",
                          what, group, correction));
      return std::nullopt;
    }
    if (group && !sizes.empty()) {
      auto it = sizes.find(x.dims[0]);
      if (it != sizes.end() && it->second % group) {
        fail(e.loc, formatv("a batch of {0} rows does not split into groups "
                            "of {1}; generate with 'n = {1}' so every "
                            "prompt has a full group",
                            it->second, group));
        return std::nullopt;
      }
    }
  }
  if (over == "seq" || over == "group") {
    v.rank = FnRank::Seq;
    v.dims = {x.dims[0]};
  } else {
    v.rank = FnRank::Scalar;
    v.reduced = loss && !spread;
  }
  v.id = emit(name, operands, v.rank, e.loc);
  FnOp &op = ops[size_t(v.id)];
  op.group = group;
  op.correction = spread ? correction : 1;
  return v;
}
