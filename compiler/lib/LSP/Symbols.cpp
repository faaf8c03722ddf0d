//===- Symbols.cpp - the outline of a .rlhf file --------------------------===//
//
// One symbol per import and declaration, each spanning from its keyword to
// its `;` or closing `}`, with properties, parameters and statements as
// children; a function (`fn`) has its signature as detail and its
// parameters and lets as children.
//
//===----------------------------------------------------------------------===//

#include "Features.h"
#include "Functions.h"

#include <functional>

using namespace rlhfc;
using namespace rlhfc::lsp;
namespace mlsp = mlir::lsp;

namespace {

mlsp::SymbolKind kindOf(ast::EntityKind k) {
  switch (k) {
  case ast::EntityKind::Hardware:
    return mlsp::SymbolKind::Constant;
  case ast::EntityKind::Arch:
    return mlsp::SymbolKind::Class;
  case ast::EntityKind::Cluster:
    return mlsp::SymbolKind::Namespace;
  case ast::EntityKind::Model:
    return mlsp::SymbolKind::Object;
  case ast::EntityKind::Dataset:
    return mlsp::SymbolKind::Struct;
  }
  return mlsp::SymbolKind::Object;
}

class Outliner {
public:
  explicit Outliner(const Document &doc) : doc(doc), text(doc.getText()) {}

  void run(std::vector<mlsp::DocumentSymbol> &symbols) {
    const ast::Module *m = doc.getMainModule();
    if (!m)
      return;
    // In source order, as an outline reads; DocumentSymbol cannot be moved
    // once built, so order the declarations first.
    std::vector<std::pair<size_t, std::function<mlsp::DocumentSymbol()>>> items;
    for (const ast::ImportDecl &imp : m->imports)
      items.emplace_back(offset(imp.loc), [this, &imp] { return import(imp); });
    for (const auto &e : m->entities)
      items.emplace_back(offset(e->loc), [this, &e] { return entity(*e); });
    for (const auto &a : m->algorithms)
      items.emplace_back(offset(a->loc), [this, &a] { return algorithm(*a); });
    for (const auto &f : m->functions)
      items.emplace_back(offset(f->loc), [this, &f] { return function(*f); });
    for (const auto &r : m->runs)
      items.emplace_back(offset(r->loc), [this, &r] { return run(*r); });
    llvm::stable_sort(
        items, [](const auto &a, const auto &b) { return a.first < b.first; });
    for (auto &item : items)
      symbols.push_back(item.second());
  }

private:
  size_t offset(mlir::Location loc) const {
    return text.offsetOf(mlir::cast<mlir::FileLineColLoc>(loc));
  }
  mlsp::Range range(size_t begin, size_t end) const {
    return text.rangeOf(begin, end);
  }
  mlsp::Range nameRange(mlir::Location loc, llvm::StringRef name) const {
    size_t begin = offset(loc);
    return range(begin, begin + name.size());
  }
  /// A declaration spanning from its keyword to its closing `}`.
  mlsp::DocumentSymbol decl(llvm::StringRef name, mlsp::SymbolKind kind,
                            mlir::Location nameLoc) const {
    size_t begin = text.previousWordStart(offset(nameLoc));
    return mlsp::DocumentSymbol(name, kind, range(begin, text.itemEnd(begin)),
                                nameRange(nameLoc, name));
  }
  /// The source of an expression, up to the `;` that ends it, or the `,`
  /// or `)` in an argument list.
  std::string sourceOf(const ast::Expr &e, bool inList = false) const {
    size_t begin = start(e);
    size_t end = text.itemEnd(begin, inList);
    llvm::StringRef s = text.text().slice(begin, end);
    return s.rtrim(";").trim().str();
  }
  /// Where an expression starts: calls and fields are located at their
  /// last name, so walk to the leftmost one.
  size_t start(const ast::Expr &e) const {
    using EK = ast::Expr::Kind;
    if ((e.kind == EK::Call || e.kind == EK::Field || e.kind == EK::Slice ||
         e.kind == EK::Binary) &&
        e.base)
      return std::min(offset(e.loc), start(*e.base));
    return offset(e.loc);
  }

  mlsp::DocumentSymbol import(const ast::ImportDecl &imp) const {
    size_t begin = offset(imp.loc);
    mlsp::Range r = range(begin, text.itemEnd(begin));
    mlsp::DocumentSymbol s(imp.path, mlsp::SymbolKind::File, r, r);
    s.detail = imp.resolved;
    return s;
  }

  void properties(const std::vector<ast::Property> &props,
                  mlsp::DocumentSymbol &parent) const {
    for (const ast::Property &p : props) {
      size_t begin = offset(p.loc);
      mlsp::DocumentSymbol s(p.name, mlsp::SymbolKind::Property,
                             range(begin, text.itemEnd(begin)),
                             nameRange(p.loc, p.name));
      s.detail = p.value ? sourceOf(*p.value) : "true";
      parent.children.push_back(std::move(s));
    }
  }

  mlsp::DocumentSymbol entity(const ast::EntityDecl &e) const {
    mlsp::DocumentSymbol s = decl(e.name, kindOf(e.kind), e.loc);
    s.detail = ast::entityKindName(e.kind).str();
    if (!e.base.empty())
      s.detail += " : " + e.base;
    properties(e.props, s);
    return s;
  }

  mlsp::DocumentSymbol algorithm(const ast::AlgorithmDecl &a) const {
    mlsp::DocumentSymbol s = decl(a.name, mlsp::SymbolKind::Function, a.loc);
    s.detail = "(";
    for (size_t i = 0; i < a.params.size(); ++i)
      s.detail += (i ? ", " : "") + a.params[i].name + ": " + a.params[i].type;
    s.detail += ")";
    for (const ast::Param &p : a.params) {
      mlsp::Range r = nameRange(p.loc, p.name);
      r.end = nameRange(p.typeLoc, p.type).end;
      mlsp::DocumentSymbol ps(p.name, mlsp::SymbolKind::Variable, r,
                              nameRange(p.loc, p.name));
      ps.detail = p.type;
      s.children.push_back(std::move(ps));
    }
    for (const ast::Stmt &st : a.body)
      s.children.push_back(statement(st));
    return s;
  }

  mlsp::DocumentSymbol statement(const ast::Stmt &st) const {
    size_t exprBegin = start(*st.expr);
    size_t begin = st.target.empty() ? exprBegin : offset(st.loc);
    if (!st.annotations.empty())
      begin = std::min(begin, offset(st.annotations.front().loc));
    mlsp::Range whole = range(begin, text.itemEnd(begin));
    // The callee names an unbound statement: `actor.train`.
    std::string callee = sourceOf(*st.expr);
    callee = callee.substr(0, callee.find('('));
    if (st.target.empty()) {
      mlsp::DocumentSymbol s(callee, mlsp::SymbolKind::Method, whole,
                             range(exprBegin, exprBegin + callee.size()));
      return s;
    }
    mlsp::DocumentSymbol s(st.target, mlsp::SymbolKind::Variable, whole,
                           nameRange(st.loc, st.target));
    s.detail = callee;
    return s;
  }

  mlsp::DocumentSymbol function(const ast::FnDecl &f) const {
    mlsp::DocumentSymbol s = decl(f.name, mlsp::SymbolKind::Function, f.loc);
    s.detail = signatureOf(f);
    for (const ast::FnParam &p : f.params) {
      // From the name to the end of the type or default.
      size_t begin = offset(p.loc);
      llvm::StringRef src =
          text.text().slice(begin, text.itemEnd(begin, /*inList=*/true));
      size_t end = begin + src.rtrim().size();
      mlsp::DocumentSymbol ps(p.name, mlsp::SymbolKind::Variable,
                              range(begin, end), nameRange(p.loc, p.name));
      ps.detail = paramTypeText(p);
      s.children.push_back(std::move(ps));
    }
    for (const ast::FnStmt &st : f.body) {
      if (st.kind != ast::FnStmt::Kind::Let)
        continue;
      // From `let` to the `;`.
      size_t name = offset(st.loc);
      size_t begin = text.previousWordStart(name);
      mlsp::DocumentSymbol ls(st.name, mlsp::SymbolKind::Variable,
                              range(begin, text.itemEnd(name)),
                              nameRange(st.loc, st.name));
      ls.detail = letValueText(doc, st);
      s.children.push_back(std::move(ls));
    }
    return s;
  }

  mlsp::DocumentSymbol run(const ast::RunDecl &r) const {
    mlsp::DocumentSymbol s =
        decl("run " + r.algorithm, mlsp::SymbolKind::Event, r.loc);
    s.selectionRange = nameRange(r.loc, r.algorithm);
    s.detail = "(";
    for (size_t i = 0; i < r.args.size(); ++i) {
      s.detail += i ? ", " : "";
      if (!r.args[i].name.empty())
        s.detail += r.args[i].name + " = ";
      s.detail += sourceOf(*r.args[i].value, /*inList=*/true);
    }
    s.detail += ")";
    properties(r.props, s);
    return s;
  }

  const Document &doc;
  const SourceText &text;
};

} // namespace

void rlhfc::lsp::findDocumentSymbols(
    Document &doc, std::vector<mlsp::DocumentSymbol> &symbols) {
  Outliner(doc).run(symbols);
}
