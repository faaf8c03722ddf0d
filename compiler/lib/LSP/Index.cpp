//===- Index.cpp - the names of a document and what they stand for --------===//
//
// Walks the main file's syntax tree and resolves each name the way Sema
// does: inside an algorithm, parameters and bound results first, then the
// global declarations (clusters in @place); in a run and in a base, the
// global declarations. A callee is a function (`fn`) before a built-in of
// the same name. Inside a function, names are its parameters and lets, and
// callees functions, then primitives, or `model.` outputs.
//
//===----------------------------------------------------------------------===//

#include "Document.h"

#include "rlhfc/Frontend/Builtins.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace rlhfc;
using namespace rlhfc::lsp;
using Kind = Occurrence::Kind;

namespace {

class Indexer {
public:
  explicit Indexer(const Document &doc) : doc(doc), text(doc.getText()) {}

  std::vector<Occurrence> run() {
    const ast::Module *m = doc.getMainModule();
    if (!m)
      return {};
    for (const ast::ImportDecl &imp : m->imports)
      import(imp);
    for (const auto &e : m->entities)
      entity(*e);
    for (const auto &a : m->algorithms)
      algorithm(*a);
    for (const auto &f : m->functions)
      function(*f);
    for (const auto &r : m->runs)
      run(*r);
    llvm::sort(out, [](const Occurrence &a, const Occurrence &b) {
      return a.begin < b.begin;
    });
    return std::move(out);
  }

private:
  Occurrence *add(Kind kind, mlir::Location loc, llvm::StringRef name) {
    auto fileLoc = mlir::dyn_cast<mlir::FileLineColLoc>(loc);
    if (!fileLoc || !doc.isMainFile(fileLoc.getFilename().getValue()))
      return nullptr;
    Occurrence o;
    o.kind = kind;
    o.begin = text.offsetOf(fileLoc);
    o.end = o.begin + name.size();
    o.name = name.str();
    o.algorithm = alg;
    o.fn = fn;
    out.push_back(std::move(o));
    return &out.back();
  }

  void import(const ast::ImportDecl &imp) {
    // The import is located at its keyword; the name is the path string.
    auto fileLoc = mlir::dyn_cast<mlir::FileLineColLoc>(imp.loc);
    if (!fileLoc)
      return;
    size_t after = text.offsetOf(fileLoc) + llvm::StringRef("import").size();
    // The path is the first string after the keyword, past any comments.
    llvm::StringRef src = text.text();
    size_t i = after;
    while (i < src.size() && src[i] != '"') {
      size_t skipped =
          llvm::isSpace(src[i]) ? i + 1 : text.skipCommentOrString(i);
      if (skipped == i)
        break;
      i = skipped;
    }
    Occurrence o;
    o.kind = Kind::Import;
    o.begin = i;
    o.end = text.tokenEnd(i);
    o.name = imp.path;
    o.import = &imp;
    out.push_back(std::move(o));
  }

  /// A name outside algorithm bodies: a global declaration or nothing.
  void global(const ast::Expr &e) {
    if (e.kind != ast::Expr::Kind::Name)
      return;
    if (const ast::EntityDecl *d = doc.lookupEntity(e.text))
      if (Occurrence *o = add(Kind::Entity, e.loc, e.text))
        o->entity = d;
  }

  void entity(const ast::EntityDecl &e) {
    if (Occurrence *o = add(Kind::Entity, e.loc, e.name)) {
      o->entity = &e;
      o->isDecl = true;
    }
    if (!e.base.empty())
      if (const ast::EntityDecl *base = doc.lookupEntity(e.base))
        if (Occurrence *o = add(Kind::Entity, e.baseLoc, e.base))
          o->entity = base;
  }

  void run(const ast::RunDecl &r) {
    if (Occurrence *o = add(Kind::Algorithm, r.loc, r.algorithm))
      o->algorithm = doc.lookupAlgorithm(r.algorithm);
    for (const ast::Arg &a : r.args)
      global(*a.value);
    for (const ast::Property &p : r.props)
      if (p.value)
        global(*p.value); // cluster = NAME
  }

  void algorithm(const ast::AlgorithmDecl &a) {
    alg = &a;
    if (Occurrence *o = add(Kind::Algorithm, a.loc, a.name))
      o->isDecl = true;
    for (const ast::Param &p : a.params)
      if (Occurrence *o = add(Kind::Param, p.loc, p.name)) {
        o->param = &p;
        o->isDecl = true;
      }
    for (const ast::Stmt &s : a.body) {
      stmt = &s;
      for (const ast::Annotation &an : s.annotations)
        for (const ast::Arg &arg : an.args)
          expr(*arg.value);
      if (!s.target.empty())
        if (Occurrence *o = add(Kind::Result, s.loc, s.target)) {
          o->stmt = &s;
          o->isDecl = true;
        }
      expr(*s.expr);
    }
    alg = nullptr;
    stmt = nullptr;
  }

  void function(const ast::FnDecl &f) {
    fn = &f;
    if (Occurrence *o = add(Kind::Function, f.loc, f.name))
      o->isDecl = true;
    for (const ast::FnParam &p : f.params)
      if (Occurrence *o = add(Kind::FnLocal, p.loc, p.name)) {
        o->fnParam = &p;
        o->isDecl = true;
      }
    for (const ast::FnStmt &s : f.body) {
      // A let's value reads the names bound before it.
      for (const ast::ExprPtr &v : s.values)
        expr(*v);
      if (s.kind == ast::FnStmt::Kind::Let)
        if (Occurrence *o = add(Kind::FnLocal, s.loc, s.name)) {
          o->let = &s;
          o->isDecl = true;
        }
      bound.push_back(&s);
    }
    fn = nullptr;
    bound.clear();
  }

  /// A name in a function body: the latest let of it, or a parameter.
  void fnLocal(const ast::Expr &e) {
    for (auto it = bound.rbegin(); it != bound.rend(); ++it)
      if ((*it)->kind == ast::FnStmt::Kind::Let && (*it)->name == e.text) {
        if (Occurrence *o = add(Kind::FnLocal, e.loc, e.text))
          o->let = *it;
        return;
      }
    for (const ast::FnParam &p : fn->params)
      if (p.name == e.text) {
        if (Occurrence *o = add(Kind::FnLocal, e.loc, e.text))
          o->fnParam = &p;
        return;
      }
  }

  /// A name in an algorithm body.
  void local(const ast::Expr &e) {
    auto param = llvm::find_if(
        alg->params, [&](const ast::Param &p) { return p.name == e.text; });
    if (param != alg->params.end()) {
      if (Occurrence *o = add(Kind::Param, e.loc, e.text))
        o->param = &*param;
      return;
    }
    auto bound = llvm::find_if(
        alg->body, [&](const ast::Stmt &s) { return s.target == e.text; });
    if (bound != alg->body.end()) {
      if (Occurrence *o = add(Kind::Result, e.loc, e.text))
        o->stmt = &*bound;
      return;
    }
    global(e);
  }

  void expr(const ast::Expr &e) {
    using EK = ast::Expr::Kind;
    switch (e.kind) {
    case EK::Name:
      return fn ? fnLocal(e) : local(e);
    case EK::Field:
      expr(*e.base);
      if (Occurrence *o = add(Kind::Field, e.loc, e.text))
        o->expr = &e;
      return;
    case EK::Call:
      call(e);
      return;
    case EK::Slice:
      expr(*e.base);
      expr(*e.lo);
      expr(*e.hi);
      return;
    case EK::Neg:
      expr(*e.base);
      return;
    case EK::Binary:
      if (e.base)
        expr(*e.base);
      if (e.hi)
        expr(*e.hi);
      return;
    case EK::List:
      for (const auto &x : e.elems)
        expr(*x);
      return;
    case EK::Number:
    case EK::String:
    case EK::Bool:
      return;
    }
  }

  void call(const ast::Expr &e) {
    const ast::Expr &callee = *e.base;
    Occurrence *o = nullptr;
    bool isName = callee.kind == ast::Expr::Kind::Name;
    const ast::FnDecl *f = isName ? doc.lookupFunction(callee.text) : nullptr;
    if (fn) {
      // `model.logprobs(seq)`; `model` itself names nothing to show.
      bool output = callee.kind == ast::Expr::Kind::Field &&
                    callee.base->kind == ast::Expr::Kind::Name &&
                    callee.base->text == "model";
      if (output) {
        add(Kind::Output, callee.loc, callee.text);
      } else if (f) {
        if (Occurrence *called = add(Kind::Function, callee.loc, callee.text))
          called->fn = f;
      } else if (isName && lookupFnPrimitive(callee.text)) {
        add(Kind::Primitive, callee.loc, callee.text);
      } else {
        expr(callee);
      }
    } else if (callee.kind == ast::Expr::Kind::Field) {
      expr(*callee.base);
      o = add(Kind::Method, callee.loc, callee.text);
    } else if (f) {
      if ((o = add(Kind::Function, callee.loc, callee.text)))
        o->fn = f;
    } else if (isName && lookupBuiltin(callee.text)) {
      o = add(Kind::Builtin, callee.loc, callee.text);
    } else if (isName && lookupControl(callee.text)) {
      add(Kind::Primitive, callee.loc, callee.text);
    } else {
      expr(callee);
    }
    if (o) {
      o->expr = &e;
      o->stmt = stmt;
      // Sema locates a statement's own call at the statement when it binds a
      // name (`g = actor.generate(...)` is at `g`), otherwise at the callee.
      bool bindsIt = stmt && stmt->expr.get() == &e && !stmt->target.empty();
      o->nodeLoc = bindsIt ? stmt->loc : e.loc;
    }
    for (const ast::Arg &a : e.args)
      expr(*a.value);
  }

  const Document &doc;
  const SourceText &text;
  const ast::AlgorithmDecl *alg = nullptr;
  const ast::Stmt *stmt = nullptr;
  /// The function being indexed, and its statements so far.
  const ast::FnDecl *fn = nullptr;
  std::vector<const ast::FnStmt *> bound;
  std::vector<Occurrence> out;
};

} // namespace

std::vector<Occurrence> rlhfc::lsp::indexOccurrences(const Document &doc) {
  return Indexer(doc).run();
}
