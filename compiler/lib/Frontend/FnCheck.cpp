//===- FnCheck.cpp - signatures and instantiation of functions ------------===//

#include "FnCheck.h"
#include "FnEval.h"

#include "rlhfc/Frontend/Builtins.h"
#include "rlhfc/Frontend/Units.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <set>

using namespace rlhfc;
using namespace rlhfc::sema;
using ast::FnDecl;
using ast::FnType;
using llvm::formatv;

namespace {

/// The kinds a signature may name, and their ranks (0: [N] or [N, S]).
struct KindRule {
  const char *name;
  TensorKind kind;
  int rank;
};
const KindRule kKinds[] = {
    {"tokens", TensorKind::Tokens, 2},
    {"mask", TensorKind::Mask, 2},
    {"logprobs", TensorKind::Logprobs, 2},
    {"values", TensorKind::Values, 2},
    {"returns", TensorKind::Returns, 2},
    {"score", TensorKind::Score, 1},
    {"advantages", TensorKind::Advantages, 0},
};

const KindRule *kindRule(llvm::StringRef name) {
  for (const KindRule &k : kKinds)
    if (name == k.name)
      return &k;
  return nullptr;
}

std::string typeText(const FnType &t) {
  return t.dims.empty() ? t.kind
                        : t.kind + "[" + llvm::join(t.dims, ", ") + "]";
}

/// A default is a number, written plainly.
bool plainNumber(const ast::Expr &e) {
  if (e.kind == ast::Expr::Kind::Neg)
    return plainNumber(*e.base);
  return e.kind == ast::Expr::Kind::Number && e.text.empty();
}

bool integerLiteral(const ast::Expr &e) {
  if (e.kind == ast::Expr::Kind::Neg)
    return integerLiteral(*e.base);
  return e.number == std::floor(e.number);
}

} // namespace

std::optional<TensorKind> FnChecker::kindOf(const FnType &t) {
  if (t.kind == "loss")
    return TensorKind::Loss;
  if (const KindRule *k = kindRule(t.kind))
    return k->kind;
  return std::nullopt;
}

bool FnChecker::isLoss(const FnDecl &d) {
  return !d.results.empty() && d.results[0].second.kind == "loss";
}

std::string FnChecker::signature(const FnDecl &d) {
  std::string s = "(";
  for (size_t i = 0; i < d.params.size(); ++i) {
    const ast::FnParam &p = d.params[i];
    s += (i ? ", " : "") + p.name + ": " + typeText(p.type);
    if (p.fallback && p.fallback->kind == ast::Expr::Kind::Number)
      s += " = " + formatNumber(p.fallback->number);
  }
  s += ") -> ";
  if (!d.namedResults)
    return s + typeText(d.results[0].second);
  s += "(";
  for (size_t i = 0; i < d.results.size(); ++i)
    s += (i ? ", " : "") + d.results[i].first + ": " +
         typeText(d.results[i].second);
  return s + ")";
}

const FnDecl *FnChecker::find(llvm::StringRef name) const {
  auto it = decls.find(name.str());
  return it == decls.end() ? nullptr : it->second.front();
}

const FnDecl *
FnChecker::pick(llvm::StringRef name,
                llvm::ArrayRef<std::optional<size_t>> ranks) const {
  auto it = decls.find(name.str());
  if (it == decls.end())
    return nullptr;
  for (const FnDecl *d : it->second) {
    bool fits = true;
    for (size_t i = 0; i < d->params.size() && i < ranks.size(); ++i)
      if (ranks[i] && *ranks[i] != d->params[i].type.dims.size())
        fits = false;
    if (fits)
      return d;
  }
  return nullptr;
}

bool FnChecker::overloaded(llvm::StringRef name) const {
  auto it = decls.find(name.str());
  return it != decls.end() && it->second.size() > 1;
}

std::string FnChecker::candidates(llvm::StringRef name) const {
  std::string s;
  auto it = decls.find(name.str());
  if (it == decls.end())
    return s;
  for (const FnDecl *d : it->second)
    s += (s.empty() ? "'" : " or '") + d->name + signature(*d) + "'";
  return s;
}

bool FnChecker::checkOverloads(const std::vector<const FnDecl *> &set) {
  const FnDecl &first = *set.front();
  bool ok = true;
  for (size_t k = 1; k < set.size(); ++k) {
    const FnDecl &d = *set[k];
    bool same = d.params.size() == first.params.size() &&
                d.results.size() == first.results.size() &&
                isLoss(d) == isLoss(first);
    for (size_t i = 0; same && i < d.params.size(); ++i) {
      const ast::FnParam &a = d.params[i], &b = first.params[i];
      same = a.name == b.name && a.type.kind == b.type.kind &&
             (isNumber(a.type) && a.type.dims.empty()) ==
                 (isNumber(b.type) && b.type.dims.empty());
    }
    for (size_t i = 0; same && i < d.results.size(); ++i)
      same = d.results[i].first == first.results[i].first;
    if (!same) {
      error(d.loc, "an overload of '" + d.name +
                       "' takes the parameters of the first, with the same "
                       "names, kinds and results, and differs only in the "
                       "shapes of tensor parameters")
              .attachNote(first.loc)
          << "the first '" << d.name << "' is declared here";
      ok = false;
      continue;
    }
    // Overloads are told apart by the ranks of their tensor parameters.
    auto sameShapes = [&](const FnDecl *o) {
      for (size_t i = 0; i < d.params.size(); ++i)
        if (d.params[i].type.dims.size() != o->params[i].type.dims.size())
          return false;
      return true;
    };
    if (std::any_of(set.begin(), set.begin() + k, sameShapes)) {
      error(d.loc, "function '" + d.name +
                       "' is already declared with parameters of these "
                       "shapes; overloads differ in the shapes of tensor "
                       "parameters")
              .attachNote(first.loc)
          << "previous declaration of '" << d.name << "' (a function) is here";
      ok = false;
    }
  }
  return ok;
}

std::vector<std::string> FnChecker::names() const {
  std::vector<std::string> out;
  for (auto &kv : decls)
    out.push_back(kv.first);
  return out;
}

bool FnChecker::checkAll() {
  bool ok = true;
  for (auto &kv : decls) {
    if (kv.second.size() > 1)
      ok &= checkOverloads(kv.second);
    for (const FnDecl *d : kv.second)
      ok &= valid(*d);
  }
  return ok;
}

namespace {

/// The signature's own rules; false after an error.
bool checkSignature(const FnDecl &d, const FnChecker::Diag &error) {
  bool ok = true;
  auto bad = [&](mlir::Location loc, const llvm::Twine &msg) {
    ok = false;
    return error(loc, msg);
  };
  std::set<std::string> seen, dims;
  for (const ast::FnParam &p : d.params) {
    if (!seen.insert(p.name).second)
      bad(p.loc,
          "parameter '" + p.name + "' of '" + d.name + "' is declared twice");
    const FnType &t = p.type;
    bool number = FnChecker::isNumber(t);
    const KindRule *k = kindRule(t.kind);
    for (const std::string &n : t.dims)
      dims.insert(n);
    if (!number && !k) {
      bad(t.loc, "unknown parameter type '" + t.kind +
                     "'; a parameter is tokens, mask, logprobs, values, "
                     "returns, score or advantages with a shape such as "
                     "[N, S], a number, or an int");
      continue;
    }
    if (t.kind == "int" && !t.dims.empty())
      bad(t.loc, "an int has no shape; per-sequence numbers are number[N]");
    else if (t.dims.size() > 2)
      bad(t.loc, "a function's tensors are per sequence [N] or per token "
                 "[N, S], not " +
                     typeText(t));
    else if (k && k->rank && int(t.dims.size()) != k->rank)
      bad(t.loc, formatv("{0} is {1}: write {0}{2}", t.kind,
                         k->rank == 1 ? "per sequence" : "per token",
                         k->rank == 1 ? "[N]" : "[N, S]"));
    else if (k && t.dims.empty())
      bad(t.loc,
          t.kind + " needs a shape: " + t.kind + "[N] or " + t.kind + "[N, S]");
    if (p.fallback && (!number || !t.dims.empty()))
      bad(p.fallback->loc, "only number parameters have defaults");
    else if (p.fallback && !plainNumber(*p.fallback))
      bad(p.fallback->loc, "a default is a plain number, such as 0.2");
    else if (p.fallback && t.kind == "int" && !integerLiteral(*p.fallback))
      bad(p.fallback->loc,
          "the default of int parameter '" + p.name + "' must be an integer");
  }
  seen.clear();
  for (auto &[name, t] : d.results) {
    if (d.namedResults && !seen.insert(name).second)
      bad(t.loc, "result '" + name + "' of '" + d.name + "' is declared twice");
    if (t.kind == "loss") {
      if (&t != &d.results[0].second || !t.dims.empty())
        bad(t.loc, "a loss is the first result of a loss function, one "
                   "scalar: write '-> loss' or '-> (loss: loss, kl: "
                   "number)'");
      continue;
    }
    if (FnChecker::isLoss(d) && (t.kind != "number" || !t.dims.empty())) {
      bad(t.loc, "after its loss, a loss function returns metrics: scalars "
                 "written 'name: number'");
      continue;
    }
    const KindRule *k = kindRule(t.kind);
    if (t.kind == "tokens") {
      bad(t.loc, "a function cannot return token ids");
      continue;
    }
    if (!k && t.kind != "number") {
      bad(t.loc, "unknown result type '" + t.kind +
                     "'; a result is mask, logprobs, values, returns, "
                     "score, advantages or number with a shape, or loss");
      continue;
    }
    if (t.dims.size() > 2 || (k && k->rank && int(t.dims.size()) != k->rank) ||
        (k && t.dims.empty()))
      bad(t.loc, "result " + typeText(t) + " needs the shape [N] or [N, S]" +
                     (k && k->rank ? std::string(k->rank == 1 ? " ([N] here)"
                                                              : " ([N, S] "
                                                                "here)")
                                   : std::string()));
    for (const std::string &n : t.dims)
      if (!dims.count(n))
        bad(t.loc, "dimension '" + n +
                       "' of the result is not a dimension "
                       "of any parameter of '" +
                       d.name + "'");
  }
  if (lookupFnPrimitive(d.name))
    bad(d.loc, "'" + d.name +
                   "' is a primitive of function bodies; choose "
                   "another name");
  return ok;
}

} // namespace

bool FnChecker::valid(const FnDecl &d) {
  State &s = states[&d];
  if (s == State::Valid || s == State::Invalid)
    return s == State::Valid;
  if (s == State::InProgress)
    return false; // a cycle: the call that closes it reports it
  s = State::InProgress;
  bool ok = checkSignature(d, error);
  if (ok) {
    FnEval ev(*this, d, /*generic=*/true, nullptr);
    std::vector<FnVal> params;
    int64_t inputs = 0;
    for (const ast::FnParam &p : d.params)
      params.push_back(isNumber(p.type) && p.type.dims.empty()
                           ? ev.number(std::nullopt)
                           : ev.input(inputs++, p.type, p.type.dims));
    ok = ev.run(std::move(params)).has_value() && !ev.failed;
  }
  states[&d] = ok ? State::Valid : State::Invalid;
  return ok;
}

std::optional<FnBody> FnChecker::instantiate(const FnDecl &d,
                                             llvm::ArrayRef<FnArg> args,
                                             mlir::Location call,
                                             RecordType &result) {
  if (!valid(d))
    return std::nullopt;
  FnEval ev(*this, d, /*generic=*/false, call);
  // Bind the dimensions to the sizes of the call's tensors.
  for (size_t i = 0; i < d.params.size(); ++i) {
    const ast::FnParam &p = d.params[i];
    if (!args[i].tensor)
      continue;
    for (size_t k = 0; k < p.type.dims.size(); ++k) {
      int64_t size = args[i].tensor->shape[k];
      auto [it, fresh] = ev.sizes.try_emplace(p.type.dims[k], size);
      if (!fresh && it->second != size) {
        error(args[i].loc ? mlir::Location(args[i].loc) : call,
              formatv("dimension '{0}' of '{1}' is {2} for '{3}', but {4} for "
                      "an earlier parameter",
                      p.type.dims[k], d.name, size, p.name, it->second));
        return std::nullopt;
      }
    }
  }
  std::vector<FnVal> params;
  int64_t inputs = 0;
  for (size_t i = 0; i < d.params.size(); ++i) {
    const ast::FnParam &p = d.params[i];
    if (args[i].tensor)
      params.push_back(ev.input(inputs++, p.type, p.type.dims));
    else if (args[i].control)
      params.push_back(ev.adaptive(*args[i].control, args[i].loc));
    else
      params.push_back(ev.number(args[i].number));
  }
  auto out = ev.run(std::move(params));
  if (!out)
    return std::nullopt;
  // A coefficient follows what the call measures: a number result named
  // kl or entropy (a loss's metric).
  for (size_t i = 0; i < d.params.size(); ++i) {
    if (!args[i].control)
      continue;
    const ControlSpec &c = *lookupControl(args[i].control->name());
    auto m = llvm::find_if(d.results, [&](const auto &r) {
      return r.first == c.metric && r.second.dims.empty();
    });
    if (m == d.results.end() || (isLoss(d) && m == d.results.begin())) {
      error(args[i].loc ? mlir::Location(args[i].loc) : call,
            llvm::formatv("{0} moves '{1}' after each call toward a target "
                          "{2}, which it reads from the call's number result "
                          "'{3}', but '{4}' has none; return the {2} it "
                          "measures as '{3}: number', as {5}",
                          c.spec.name, d.params[i].name, c.noun, c.metric,
                          d.name, c.returners)
                .str());
      return std::nullopt;
    }
  }
  FnBody body;
  body.name = d.name;
  body.loss = isLoss(d);
  body.ops = std::move(ev.ops);
  result.fields.clear();
  if (body.loss) {
    int64_t n = 1;
    for (const FnArg &a : args)
      if (a.tensor) {
        n = a.tensor->batch();
        break;
      }
    result.fields.push_back({"loss", {TensorKind::Loss, DType::F32, {n}}});
    for (size_t i = 0; i < d.results.size(); ++i)
      body.outputs.push_back({i ? d.results[i].first : "loss", (*out)[i].id});
    return body;
  }
  for (size_t i = 0; i < d.results.size(); ++i) {
    auto &[name, t] = d.results[i];
    // A scalar result is a metric, logged under its name every step.
    if (t.dims.empty() && d.results.size() == 1 && name == t.kind) {
      error(call, "'" + d.name +
                      "' returns an unnamed scalar, which the run "
                      "would log as a metric; name it, as in '-> (mean: " +
                      t.kind + ")', or call '" + d.name +
                      "' inside another function");
      return std::nullopt;
    }
    TensorType tt{kindOf(t).value_or(TensorKind::Number), DType::F32, {}};
    for (const std::string &n : t.dims)
      tt.shape.push_back(ev.sizes.at(n));
    result.fields.push_back({name, tt});
    body.outputs.push_back({name, (*out)[i].id});
  }
  return body;
}
