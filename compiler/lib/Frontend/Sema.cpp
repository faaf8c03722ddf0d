//===- Sema.cpp - the driver: symbols, diagnostics, entry point -----------===//

#include "SemaImpl.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

rlhf::ModelShape Arch::shape(bool valueHead) const {
  rlhf::ModelShape s{layers, hidden, heads,         kvHeads,
                     ffn,    vocab,  tieEmbeddings, valueHead};
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
  case Node::Kind::Generate:
    return "generate";
  case Node::Kind::Inference:
    return "inference";
  case Node::Kind::Train:
    return "train";
  case Node::Kind::Host:
    return "host";
  case Node::Kind::Ema:
    return "ema";
  }
  return "?";
}

mlir::LogicalResult Sema::run() {
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

mlir::InFlightDiagnostic Sema::error(mlir::Location loc,
                                     const llvm::Twine &msg) {
  failed = true;
  ++numErrors;
  mlir::InFlightDiagnostic d = mlir::emitError(loc, msg);
  // An error in an imported algorithm (the stdlib's) while a run types it
  // is often the run's doing: point at the run too.
  auto file = [](mlir::Location l) {
    auto f = mlir::dyn_cast<mlir::FileLineColLoc>(l);
    return f ? f.getFilename().strref() : StringRef();
  };
  if (currentRun && current && !file(loc).empty() &&
      file(loc) != file(currentRun->loc))
    d.attachNote(currentRun->loc)
        << "while typing the run of '" << currentRun->algorithm << "' here";
  return d;
}

void Sema::unknownFunction(mlir::Location loc, llvm::StringRef name,
                           const std::string &hint) {
  mlir::InFlightDiagnostic d =
      error(loc, formatv("unknown function '{0}'{1}", name, hint));
  if (!p.missingPrelude.empty())
    d.attachNote() << "the standard library has no prelude ('"
                   << p.missingPrelude
                   << "' does not exist), which declares the estimators and "
                      "losses such as gae and grpo_loss; point --stdlib at a "
                      "folder that has one";
}

void Sema::warning(mlir::Location loc, const llvm::Twine &msg) {
  mlir::emitWarning(loc, msg);
}

void Sema::collectSymbols() {
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
  // Names the prelude declared, which the program's do not clash with.
  llvm::StringSet<> preludeFns;
  for (const ast::Module *m : declarationOrder(p)) {
    for (auto &e : m->entities)
      add(e->name, Symbol{Symbol::Entity, e.get(), nullptr, e->loc});
    for (auto &a : m->algorithms) {
      add(a->name, Symbol{Symbol::Algorithm, nullptr, a.get(), a->loc});
      p.algorithms[a->name] = a.get();
    }
    for (auto &f : m->functions) {
      // Functions of one name are overloads (FnChecker checks them).
      auto it = symbols.find(f->name);
      if (m->prelude && it != symbols.end() && !preludeFns.count(f->name))
        continue; // shadowed by the program
      if (m->prelude)
        preludeFns.insert(f->name);
      if (it != symbols.end() && it->second.kind == Symbol::Function) {
        fns.add(*f, m->prelude);
        continue;
      }
      add(f->name, Symbol{Symbol::Function, nullptr, nullptr, f->loc});
      if (!p.functions.count(f->name)) {
        p.functions[f->name] = f.get();
        fns.add(*f, m->prelude);
      }
    }
  }
}

std::vector<std::string> Sema::namesOfKind(std::optional<EntityKind> k) {
  std::vector<std::string> out;
  for (auto &[n, s] : symbols)
    if (!k || (s.kind == Symbol::Entity && s.entity->kind == *k))
      out.push_back(n);
  return out;
}

const EntityDecl *Sema::lookupEntity(StringRef name, EntityKind k,
                                     mlir::Location use, StringRef role) {
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

std::vector<const ast::Module *> sema::declarationOrder(const Program &p) {
  std::vector<const ast::Module *> order;
  for (size_t i = 1; i < p.modules.size(); ++i)
    if (!p.modules[i]->prelude)
      order.push_back(p.modules[i].get());
  if (!p.modules.empty())
    order.push_back(p.modules.front().get());
  for (size_t i = 1; i < p.modules.size(); ++i)
    if (p.modules[i]->prelude)
      order.push_back(p.modules[i].get());
  return order;
}

mlir::LogicalResult sema::check(Program &p, mlir::MLIRContext &ctx) {
  return Sema(p, ctx).run();
}
