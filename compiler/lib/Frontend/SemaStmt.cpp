//===- SemaStmt.cpp - an algorithm body's statements and values ----------===//
//
// While a run types its algorithm: the value an expression names (a
// parameter, a result, a field), each statement's call and annotations,
// and which names were used.
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

std::optional<Sema::Value> Sema::evalValue(const Expr &e,
                                           llvm::StringMap<Local> &env) {
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
      auto diag = error(
          e.loc, formatv("no field '{0}' in {1} (fields: {2}){3}", e.text,
                         base->kind == Value::Dataset
                             ? "dataset '" + base->dataset->name + "'"
                         : base->origin.empty() ? std::string("this record")
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
    v.dataset = base->dataset;
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
  case Expr::Kind::Bool:
    error(e.loc, std::string("'") + (e.boolean ? "true" : "false") +
                     "' is not a value here; a setting that switches "
                     "something on takes 1 (on) or 0 (off)");
    return std::nullopt;
  case Expr::Kind::String:
    error(e.loc, "a string is not a value here; give a value name, a field "
                 "such as 'g.seq', or a number (only text settings, such as "
                 "'command' of script_reward, take a string)");
    return std::nullopt;
  default:
    error(e.loc, "expected a value name, a field such as 'g.seq', or a number");
    return std::nullopt;
  }
}

void Sema::checkStmt(const Stmt &s, llvm::StringMap<Local> &env) {
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
  const Annotation *filter = nullptr;
  for (const Annotation &an : s.annotations)
    if (an.name == "filter_groups")
      filter = &an;
    else
      checkAnnotation(an, *node, env);
  if (filter)
    readFilterAnnotation(*filter, int(current->nodes.size()));
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
  if (filter)
    keepFilteredRows(env);
}

void Sema::markUsed(const Expr &e, llvm::StringMap<Local> &env) {
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
