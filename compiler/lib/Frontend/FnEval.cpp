//===- FnEval.cpp - typing and inlining function bodies -------------------===//

#include "FnEval.h"

#include "rlhfc/Frontend/Builtins.h"
#include "rlhfc/Frontend/Units.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace rlhfc;
using namespace rlhfc::sema;
using ast::Expr;
using ast::FnDecl;
using llvm::formatv;
using llvm::StringRef;

namespace {

bool isCompare(StringRef op) {
  return op == "<" || op == "<=" || op == ">" || op == ">=" || op == "==" ||
         op == "!=";
}

const char *compareOp(StringRef op) {
  return op == "<"    ? "lt"
         : op == "<=" ? "le"
         : op == ">"  ? "gt"
         : op == ">=" ? "ge"
         : op == "==" ? "eq"
                      : "ne";
}

bool isLm(StringRef output) {
  return output == "logprobs" || output == "entropy";
}

} // namespace

std::string sema::shapeText(const FnVal &v) {
  if (v.rank == FnRank::Scalar)
    return "a scalar";
  std::string dims = "[" + llvm::join(v.dims, ", ") + "]";
  return v.rank == FnRank::Tokens ? "token ids " + dims : dims;
}

FnEval::FnEval(FnChecker &c, const FnDecl &top, bool generic,
               mlir::LocationAttr callSite)
    : c(c), top(top), generic(generic), loss(FnChecker::isLoss(top)),
      callSite(callSite) {}

mlir::InFlightDiagnostic FnEval::fail(mlir::Location loc,
                                      const llvm::Twine &msg) {
  failed = true;
  // A library function checked fine too: report at the algorithm's call,
  // once per message (two reductions may both find a group misfit).
  if (!generic && callSite && c.libraryDecls.count(&top)) {
    std::string text = msg.str();
    auto d = c.error(mlir::Location(callSite), text);
    d.attachNote(loc) << "inside '"
                      << (stack.empty() ? top.name : stack.back().decl->name)
                      << "', here";
    if (!reportedAtCall.insert(text).second)
      d.abandon();
    return d;
  }
  // Inside an inlined callee the callee itself checked fine, so the error
  // comes from how it is called: report it at the call.
  if (stack.size() > 1) {
    auto d = c.error(mlir::Location(stack[1].callLoc), msg);
    d.attachNote(loc) << "inside '" << stack.back().decl->name << "', here";
    if (!generic && callSite)
      d.attachNote(mlir::Location(callSite))
          << "in the call of '" << top.name << "' here";
    return d;
  }
  auto d = c.error(loc, msg);
  if (!generic && callSite)
    d.attachNote(mlir::Location(callSite))
        << "in the call of '" << top.name << "' here";
  return d;
}

int FnEval::emit(StringRef op, std::vector<int> args, FnRank rank,
                 mlir::Location loc, double number) {
  FnOp o;
  o.op = op.str();
  o.args = std::move(args);
  o.rank = rank;
  o.number = number;
  o.loc = loc;
  ops.push_back(std::move(o));
  return int(ops.size()) - 1;
}

FnVal FnEval::input(int64_t index, const ast::FnType &t,
                    std::vector<std::string> dims) {
  FnVal v;
  v.kind = FnChecker::kindOf(t);
  v.rank = v.kind == TensorKind::Tokens ? FnRank::Tokens : FnRank(dims.size());
  v.dims = std::move(dims);
  v.id = emit("input", {}, v.rank, t.loc, double(index));
  v.input = true;
  return v;
}

FnVal FnEval::number(std::optional<double> value) {
  FnVal v;
  v.number = true;
  v.constant = value;
  v.id = emit("const", {}, FnRank::Scalar, top.loc, value.value_or(0));
  return v;
}

FnVal FnEval::adaptive(const FnControl &c, mlir::LocationAttr loc) {
  FnVal v;
  v.number = true;
  v.id = emit(c.name(), {}, FnRank::Scalar,
              loc ? mlir::Location(loc) : mlir::Location(top.loc));
  ops[size_t(v.id)].control = c;
  return v;
}

std::optional<std::vector<FnVal>> FnEval::run(std::vector<FnVal> params) {
  std::map<std::string, std::string> dims;
  for (const ast::FnParam &p : top.params)
    for (const std::string &d : p.type.dims)
      dims[d] = d;
  auto out = body(top, std::move(params), dims, nullptr);
  if (failed)
    return std::nullopt;
  return out;
}

std::optional<std::vector<FnVal>>
FnEval::body(const FnDecl &d, std::vector<FnVal> args,
             std::map<std::string, std::string> dims,
             mlir::LocationAttr callLoc) {
  stack.push_back(Frame{&d, {}, callLoc, std::move(dims)});
  Frame &f = stack.back();
  for (size_t i = 0; i < d.params.size(); ++i)
    f.env[d.params[i].name] = args[i];
  std::optional<std::vector<FnVal>> out;
  bool returned = false;
  for (const ast::FnStmt &s : d.body) {
    if (returned) {
      fail(s.loc, "'return' must be the last statement of '" + d.name + "'");
      break;
    }
    if (s.kind == ast::FnStmt::Kind::Let) {
      if (f.env.count(s.name)) {
        fail(s.loc, "'" + s.name + "' is already defined in '" + d.name +
                        "'; choose another name");
        continue;
      }
      std::optional<FnVal> v = expr(*s.values[0]);
      FnVal bound = v.value_or(FnVal());
      bound.poisoned = !v;
      f.env[s.name] = bound;
      continue;
    }
    returned = true;
    if (s.values.size() != d.results.size()) {
      fail(s.loc, formatv("'{0}' returns {1} value{2}, but its signature "
                          "declares {3}",
                          d.name, s.values.size(),
                          s.values.size() == 1 ? "" : "s", d.results.size()));
      continue;
    }
    std::vector<FnVal> results;
    for (size_t i = 0; i < s.values.size(); ++i) {
      std::optional<FnVal> v = expr(*s.values[i]);
      if (v)
        v = result(d, i, *v, *s.values[i], f);
      if (!v) {
        failed = true;
        continue;
      }
      results.push_back(*v);
    }
    if (results.size() == d.results.size())
      out = std::move(results);
  }
  if (!returned)
    fail(d.loc,
         "function '" + d.name + "' never returns; end it with 'return ...;'");
  // Once per declaration (the symbolic check), and not the prelude's: a
  // binding nothing reads computes nothing, and a check that only looks at
  // the body (such as staleness's) could take it for part of the loss.
  if (generic && stack.size() == 1 && !failed && !c.libraryDecls.count(&d))
    for (const ast::FnStmt &s : d.body)
      if (s.kind == ast::FnStmt::Kind::Let && !f.used.contains(s.name))
        c.warning(s.loc, "'" + s.name + "' is never used in '" + d.name +
                             "'; remove it or use it in the result");
  stack.pop_back();
  return out;
}

std::optional<FnVal> FnEval::result(const FnDecl &d, size_t i, FnVal v,
                                    const Expr &e, const Frame &f) {
  const ast::FnType &t = d.results[i].second;
  if (t.kind == "loss") {
    if (v.rank != FnRank::Scalar) {
      fail(e.loc, "a loss is a scalar, but this is " + shapeText(v) +
                      "; reduce it, e.g. token_mean(x, mask)");
      return std::nullopt;
    }
    if (stack.size() == 1 && loss)
      checkLoss(v, e);
    v.kind = TensorKind::Loss;
    return v;
  }
  if (v.rank == FnRank::Tokens) {
    fail(e.loc, "a function cannot return token ids; return values computed "
                "from them");
    return std::nullopt;
  }
  if (i > 0 && FnChecker::isLoss(d) && stack.size() == 1 && loss &&
      v.rank == FnRank::Scalar && !v.reduced) {
    fail(e.loc, "metric '" + d.results[i].first +
                    "' of a loss must be a sum of token or batch reductions "
                    "scaled by numbers, like the loss, so that it adds up "
                    "over micro-batches");
    return std::nullopt;
  }
  std::optional<TensorKind> want = FnChecker::kindOf(t);
  std::vector<std::string> dims;
  for (const std::string &n : t.dims) {
    auto it = f.dims.find(n);
    dims.push_back(it == f.dims.end() ? n : it->second);
  }
  FnVal declared;
  declared.rank = FnRank(t.dims.size());
  declared.dims = dims;
  if (v.rank != declared.rank || (v.rank != FnRank::Scalar && v.dims != dims)) {
    fail(e.loc, formatv("'{0}' declares its result {1}{2}, but this is {3}",
                        d.name, t.kind, shapeText(declared), shapeText(v)));
    return std::nullopt;
  }
  if (want && v.kind && *v.kind != *want) {
    fail(e.loc,
         formatv("'{0}' returns {1} where its signature declares {2}", d.name,
                 tensorKindNoun(*v.kind), tensorKindNoun(*want)));
    return std::nullopt;
  }
  v.kind = want;
  return v;
}

void FnEval::checkLoss(const FnVal &v, const Expr &e) {
  if (!v.model) {
    if (v.cut) {
      fail(e.loc, "loss '" + top.name +
                      "' depends on the trained model only through a "
                      "comparison, a where condition or stop_gradient, "
                      "which have no gradient; the model would not learn")
              .attachNote(mlir::Location(v.cutLoc))
          << "the gradient stops here";
      return;
    }
    fail(e.loc, "loss '" + top.name +
                    "' does not depend on the trained model; read its "
                    "outputs with model.logprobs(seq) or model.values(seq)");
    return;
  }
  if (!v.reduced)
    fail(e.loc, "a loss must be a sum of token or batch reductions "
                "(token_mean, token_sum, batch_mean, batch_sum) scaled by "
                "numbers, so that it splits over micro-batches");
}

bool FnEval::noTokens(const FnVal &v, StringRef what, mlir::Location loc) {
  if (v.rank != FnRank::Tokens)
    return true;
  fail(loc, "token ids cannot be used in " + what +
                "; use mask_of(seq), or model.logprobs(seq) in a loss");
  return false;
}

bool FnEval::notReduced(const FnVal &v, StringRef what, mlir::Location loc) {
  if (!loss || !v.reduced)
    return true;
  fail(loc, "in a loss, a batch reduction can only be added, subtracted, "
            "negated or scaled by a number, not used in " +
                what + ": the loss is summed over micro-batches");
  return false;
}

bool FnEval::sameShape(llvm::ArrayRef<const FnVal *> vs, StringRef what,
                       mlir::Location loc, FnVal &out) {
  const FnVal *shaped = nullptr;
  for (const FnVal *v : vs) {
    if (!noTokens(*v, what, loc))
      return false;
    if (v->rank == FnRank::Scalar)
      continue;
    if (!shaped) {
      shaped = v;
      continue;
    }
    if (v->rank != shaped->rank) {
      auto d = fail(loc, formatv("{0} mixes {1} and {2}", what,
                                 shapeText(*shaped), shapeText(*v)));
      d.attachNote(loc) << "broadcast(x, like) repeats a per-sequence value "
                           "along the sequence of 'like'";
      return false;
    }
    if (v->dims != shaped->dims) {
      fail(loc, formatv("{0} mixes shapes {1} and {2}", what,
                        shapeText(*shaped), shapeText(*v)));
      return false;
    }
  }
  out.rank = shaped ? shaped->rank : FnRank::Scalar;
  out.dims = shaped ? shaped->dims : std::vector<std::string>{};
  return true;
}

std::optional<int64_t> FnEval::integer(const FnVal &v, StringRef what,
                                       int64_t min, int64_t fallback,
                                       mlir::Location loc) {
  if (v.rank != FnRank::Scalar || !v.number) {
    fail(loc, what + " must be a number known before the run, not " +
                  (v.rank == FnRank::Scalar ? std::string("a value computed "
                                                          "from the batch")
                                            : shapeText(v)));
    return std::nullopt;
  }
  if (!v.constant) {
    if (generic)
      return fallback; // a symbolic parameter: checked per call
    fail(loc, what + " must be a number known before the run, but it has "
                     "no value here");
    return std::nullopt;
  }
  double x = *v.constant;
  // Group sizes and corrections count rows: 2^40 is far beyond a batch,
  // and keeps the conversion below defined.
  constexpr double kMax = double(int64_t(1) << 40);
  if (x != std::floor(x) || x < double(min) || x > kMax) {
    fail(loc, formatv("{0} must be an integer between {1} and 2^40, got {2}",
                      what, min, formatNumber(x)));
    return std::nullopt;
  }
  return int64_t(x);
}

std::optional<FnVal> FnEval::expr(const Expr &e) {
  switch (e.kind) {
  case Expr::Kind::Number: {
    if (!e.text.empty()) {
      fail(e.loc, "a unit ('" + e.text +
                      "') has no meaning in a function; write a plain number");
      return std::nullopt;
    }
    FnVal v;
    v.number = true;
    v.constant = e.number;
    v.id = emit("const", {}, FnRank::Scalar, e.loc, e.number);
    return v;
  }
  case Expr::Kind::Name: {
    Frame &f = stack.back();
    if (auto it = f.env.find(e.text); it != f.env.end()) {
      f.used.insert(e.text);
      if (it->second.poisoned)
        return std::nullopt;
      return it->second;
    }
    if (e.text == "model") {
      fail(e.loc, "'model' is the trained model; read its outputs with "
                  "model.logprobs(seq), model.values(seq), model.score(seq) "
                  "or model.entropy(seq)");
      return std::nullopt;
    }
    std::vector<std::string> names;
    for (auto &kv : f.env)
      names.push_back(kv.getKey().str());
    std::string hint;
    for (const std::string &n : names)
      if (llvm::StringRef(n).edit_distance(e.text) <= 2)
        hint = "; did you mean '" + n + "'?";
    fail(e.loc,
         "unknown name '" + e.text + "' in '" + f.decl->name + "'" + hint);
    return std::nullopt;
  }
  case Expr::Kind::Neg: {
    auto a = expr(*e.base);
    if (!a || !noTokens(*a, "arithmetic", e.loc))
      return std::nullopt;
    FnVal v = *a;
    v.input = false;
    v.id = emit("neg", {a->id}, a->rank, e.loc);
    if (v.constant)
      v.constant = -*v.constant;
    v.kind.reset();
    return v;
  }
  case Expr::Kind::Binary:
    return binary(e);
  case Expr::Kind::Call:
    return call(e);
  case Expr::Kind::Field:
    fail(e.loc, "fields are chosen where a function is called ('g.seq'), "
                "not inside it; take the tensor as a parameter");
    return std::nullopt;
  default:
    fail(e.loc, "a function computes with tensors and numbers; this is "
                "neither");
    return std::nullopt;
  }
}

std::optional<FnVal> FnEval::binary(const Expr &e) {
  auto a = expr(*e.base);
  auto b = expr(*e.hi);
  if (!a || !b)
    return std::nullopt;
  StringRef op = e.text;
  bool compare = isCompare(op);
  FnVal v;
  if (!sameShape({&*a, &*b}, compare ? "a comparison" : "arithmetic", e.loc, v))
    return std::nullopt;
  v.number = a->number && b->number;
  if (compare) {
    if (!notReduced(*a, "a comparison", e.loc) ||
        !notReduced(*b, "a comparison", e.loc))
      return std::nullopt;
    v.kind = TensorKind::Mask;
    v.cut = a->model || b->model || a->cut || b->cut;
    v.cutLoc = a->model || b->model ? mlir::LocationAttr(e.loc)
               : a->cut             ? a->cutLoc
                                    : b->cutLoc;
    if (a->constant && b->constant) {
      double x = *a->constant, y = *b->constant;
      bool r = op == "<"    ? x < y
               : op == "<=" ? x <= y
               : op == ">"  ? x > y
               : op == ">=" ? x >= y
               : op == "==" ? x == y
                            : x != y;
      v.constant = r ? 1.0 : 0.0;
    }
    v.id = emit(compareOp(op), {a->id, b->id}, v.rank, e.loc);
    return v;
  }
  v.model = a->model || b->model;
  v.cut = a->cut || b->cut;
  v.cutLoc = a->cut ? a->cutLoc : b->cutLoc;
  if (loss && (a->reduced || b->reduced)) {
    // Sums of reductions stay sums; so do reductions scaled by a number.
    bool linear = op == "+" || op == "-" ? a->reduced && b->reduced
                  : op == "*"
                      ? (a->reduced && b->number) || (b->reduced && a->number)
                      : a->reduced && b->number;
    if (!linear) {
      const FnVal &other = a->reduced ? *b : *a;
      std::string why =
          (op == "+" || op == "-") && other.number
              ? "a constant term would count once per micro-batch"
          : op == "/" && b->reduced
              ? "dividing by a reduction is not linear in the batch"
          : a->reduced && b->reduced
              ? "a product of two reductions is not linear in the batch"
              : "'" + op.str() + "' combines it with a value of the batch";
      fail(e.loc, "in a loss, batch reductions can only be added, "
                  "subtracted, negated or scaled by a number (" +
                      why + "): the loss is summed over micro-batches");
      return std::nullopt;
    }
    v.reduced = true;
  }
  const char *name = op == "+"   ? "add"
                     : op == "-" ? "sub"
                     : op == "*" ? "mul"
                                 : "div";
  if (op == "/" && b->constant && *b->constant == 0) {
    fail(e.loc, "division by zero");
    return std::nullopt;
  }
  if (a->constant && b->constant) {
    double x = *a->constant, y = *b->constant;
    v.constant = op == "+"   ? x + y
                 : op == "-" ? x - y
                 : op == "*" ? x * y
                 : y != 0    ? std::optional<double>(x / y)
                             : std::nullopt;
  }
  v.id = emit(name, {a->id, b->id}, v.rank, e.loc);
  return v;
}

std::optional<FnVal> FnEval::call(const Expr &e) {
  const Expr &callee = *e.base;
  if (callee.kind == Expr::Kind::Field &&
      callee.base->kind == Expr::Kind::Name && callee.base->text == "model")
    return modelOutput(e);
  if (callee.kind != Expr::Kind::Name) {
    fail(callee.loc, "only functions and model outputs (model.logprobs(seq)) "
                     "can be called here");
    return std::nullopt;
  }
  if (stack.back().env.count(callee.text)) {
    fail(callee.loc, "'" + callee.text + "' is a value, not a function");
    return std::nullopt;
  }
  if (const FnDecl *d = c.find(callee.text))
    return userCall(e, *d);
  if (lookupFnPrimitive(callee.text))
    return primitive(e, callee.text);
  if (const ControlSpec *spec = lookupControl(callee.text)) {
    fail(callee.loc,
         formatv("{0}(...) is given where an algorithm calls a function: "
                 "declare a number parameter here, such as '{1}: number', "
                 "and pass '{1} = {0}(...)' at the call",
                 callee.text, spec->metric)
             .str());
    return std::nullopt;
  }
  std::vector<std::string> names = c.names();
  for (const FnPrimitiveSpec &p : allFnPrimitives())
    names.push_back(p.name);
  std::string hint;
  unsigned best = 3;
  for (const std::string &n : names)
    if (unsigned dist = StringRef(n).edit_distance(callee.text); dist < best) {
      best = dist;
      hint = "; did you mean '" + n + "'?";
    }
  if (lookupBuiltin(callee.text))
    hint = "; '" + callee.text +
           "' is a host function of algorithms, called on the batch, not "
           "inside a function";
  fail(callee.loc, "unknown function '" + callee.text + "'" + hint);
  return std::nullopt;
}

std::optional<FnVal> FnEval::modelOutput(const Expr &e) {
  const Expr &callee = *e.base;
  StringRef out = callee.text;
  if (!FnChecker::isLoss(*stack.back().decl)) {
    fail(callee.base->loc, "'model' is the model a loss trains; only "
                           "functions that return 'loss' read it");
    return std::nullopt;
  }
  if (out != "logprobs" && out != "entropy" && out != "values" &&
      out != "score") {
    fail(callee.loc, "the trained model has no output '" + out.str() +
                         "' (an lm head gives logprobs and entropy, a value "
                         "head values and score)");
    return std::nullopt;
  }
  if (e.args.size() != 1 || !e.args[0].name.empty()) {
    fail(e.loc, "model." + out.str() +
                    " takes one argument, the token ids "
                    "of the sequences");
    return std::nullopt;
  }
  auto t = expr(*e.args[0].value);
  if (!t)
    return std::nullopt;
  if (t->rank != FnRank::Tokens) {
    fail(e.args[0].loc,
         "model." + out.str() + " reads token ids, but got " + shapeText(*t));
    return std::nullopt;
  }
  mlir::LocationAttr &mine = isLm(out) ? lmLoc : valueLoc;
  mlir::LocationAttr &other = isLm(out) ? valueLoc : lmLoc;
  if (!mine)
    mine = e.loc;
  if (other) {
    fail(e.loc, "a loss reads one head: model." + out.str() + " is " +
                    (isLm(out) ? "an lm head's" : "a value head's") +
                    " output, but this loss also reads the other head's")
            .attachNote(mlir::Location(other))
        << "the other head's output is read here";
    return std::nullopt;
  }
  FnVal v;
  v.model = true;
  v.kind = out == "logprobs" ? TensorKind::Logprobs
           : out == "values" ? TensorKind::Values
           : out == "score"  ? TensorKind::Score
                             : std::optional<TensorKind>();
  v.rank = out == "score" ? FnRank::Seq : FnRank::Token;
  v.dims = out == "score" ? std::vector<std::string>{t->dims[0]} : t->dims;
  v.id = emit(out, {t->id}, v.rank, e.loc);
  return v;
}
