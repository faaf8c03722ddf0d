//===- Parser.cpp - .rlhf source to AST through ANTLR4 --------------------===//
//
// ANTLR throws and needs RTTI; this file is built with both and catches
// everything before returning, so no exception reaches LLVM frames.
//
//===----------------------------------------------------------------------===//

#include "ParserImpl.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <set>

using namespace rlhfc;
using namespace rlhfc::ast;
using namespace rlhfc::parser;
using rlhf::grammar::RLHFLexer;
using rlhf::grammar::RLHFParser;

namespace {

/// Builds the AST from the parse tree.
class Builder : public SourcePositions {
public:
  using SourcePositions::SourcePositions;

  std::unique_ptr<Module> build(RLHFParser::ProgramContext *p) {
    auto m = std::make_unique<Module>();
    m->filename = filename.str();
    for (auto *d : p->decl()) {
      if (auto *i = d->importDecl()) {
        m->imports.push_back(ImportDecl{unquote(i->STRING()->getText()),
                                        loc(i), ""});
      } else if (auto *e = d->entityDecl()) {
        m->entities.push_back(entity(e));
      } else if (auto *a = d->algorithmDecl()) {
        m->algorithms.push_back(algorithm(a));
      } else if (auto *f = d->fnDecl()) {
        m->functions.push_back(function(f));
      } else if (auto *r = d->runDecl()) {
        auto run = std::make_unique<RunDecl>(RunDecl{
            r->algo->getText(), loc(r->algo), {}, {}});
        if (r->argList())
          run->args = args(r->argList());
        for (auto *p : r->property())
          run->props.push_back(property(p));
        m->runs.push_back(std::move(run));
      }
    }
    return m;
  }

private:
  static std::string unquote(const std::string &s) {
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      if (s[i] == '\\' && i + 2 < s.size()) {
        char c = s[++i];
        out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
      } else {
        out += s[i];
      }
    }
    return out;
  }

  std::unique_ptr<EntityDecl> entity(RLHFParser::EntityDeclContext *e) {
    EntityKind k;
    switch (e->kind->getType()) {
    case RLHFLexer::HARDWARE: k = EntityKind::Hardware; break;
    case RLHFLexer::ARCH: k = EntityKind::Arch; break;
    case RLHFLexer::CLUSTER: k = EntityKind::Cluster; break;
    case RLHFLexer::MODEL: k = EntityKind::Model; break;
    default: k = EntityKind::Dataset; break;
    }
    auto d = std::make_unique<EntityDecl>(EntityDecl{
        k, e->name->getText(), loc(e->name), "", loc(e->name), {}});
    if (e->base) {
      d->base = e->base->getText();
      d->baseLoc = loc(e->base);
    }
    if (e->basePath) {
      d->basePath = unquote(e->basePath->getText());
      d->basePathLoc = loc(e->basePath);
    }
    for (auto *p : e->property())
      d->props.push_back(property(p));
    return d;
  }

  Property property(RLHFParser::PropertyContext *p) {
    return Property{p->name->getText(), loc(p->name),
                    p->expr() ? expr(p->expr()) : nullptr};
  }

  std::unique_ptr<AlgorithmDecl> algorithm(RLHFParser::AlgorithmDeclContext *a) {
    auto alg = std::make_unique<AlgorithmDecl>(
        AlgorithmDecl{a->name->getText(), loc(a->name), {}, {}});
    for (auto *p : a->param())
      alg->params.push_back(Param{p->name->getText(), p->type->getText(),
                                  loc(p->name), loc(p->type)});
    for (auto *s : a->stmt()) {
      Stmt st{{}, "", loc(s), expr(s->expr())};
      if (s->target) {
        st.target = s->target->getText();
        st.loc = loc(s->target);
      } else {
        st.loc = st.expr->loc;
      }
      for (auto *an : s->annotation()) {
        Annotation ann{an->name->getText(), loc(an), {}};
        if (an->argList())
          ann.args = args(an->argList());
        st.annotations.push_back(std::move(ann));
      }
      alg->body.push_back(std::move(st));
    }
    return alg;
  }

  FnType fnType(RLHFParser::FnTypeContext *t) {
    FnType out{t->kind->getText(), {}, loc(t->kind)};
    for (antlr4::Token *d : t->dims)
      out.dims.push_back(d->getText());
    return out;
  }

  std::unique_ptr<FnDecl> function(RLHFParser::FnDeclContext *f) {
    auto fn = std::make_unique<FnDecl>(
        FnDecl{f->name->getText(), loc(f->name), {}, {}, false, {}});
    for (auto *p : f->fnParam())
      fn->params.push_back(FnParam{p->name->getText(), loc(p->name),
                                   fnType(p->fnType()),
                                   p->dflt ? expr(p->dflt) : nullptr});
    if (auto *one =
            dynamic_cast<RLHFParser::SingleResultContext *>(f->fnResults())) {
      FnType t = fnType(one->fnType());
      fn->results.push_back({t.kind, t});
    } else if (auto *named = dynamic_cast<RLHFParser::NamedResultsContext *>(
                   f->fnResults())) {
      fn->namedResults = true;
      for (auto *r : named->fnResult())
        fn->results.push_back({r->name->getText(), fnType(r->fnType())});
    }
    for (auto *s : f->fnStmt()) {
      if (auto *l = dynamic_cast<RLHFParser::LetStmtContext *>(s)) {
        FnStmt st{FnStmt::Kind::Let, l->name->getText(), loc(l->name), {}};
        st.values.push_back(expr(l->expr()));
        fn->body.push_back(std::move(st));
      } else if (auto *r = dynamic_cast<RLHFParser::ReturnStmtContext *>(s)) {
        FnStmt st{FnStmt::Kind::Return, "", loc(r), {}};
        for (auto *e : r->expr())
          st.values.push_back(expr(e));
        fn->body.push_back(std::move(st));
      }
    }
    return fn;
  }

  std::vector<Arg> args(RLHFParser::ArgListContext *l) {
    std::vector<Arg> out;
    for (auto *a : l->arg()) {
      Arg arg{"", loc(a), expr(a->expr())};
      if (a->name)
        arg.name = a->name->getText();
      out.push_back(std::move(arg));
    }
    return out;
  }

  ExprPtr expr(RLHFParser::ExprContext *c) {
    if (auto *p = dynamic_cast<RLHFParser::PrimaryExprContext *>(c))
      return primary(p->primary());
    if (auto *f = dynamic_cast<RLHFParser::FieldExprContext *>(c)) {
      auto e = std::make_unique<Expr>(Expr::Kind::Field, loc(f->IDENT()));
      e->text = f->IDENT()->getText();
      e->base = expr(f->expr());
      return e;
    }
    if (auto *call = dynamic_cast<RLHFParser::CallExprContext *>(c)) {
      auto callee = expr(call->expr());
      // A call is located at its callee's last name: `actor.generate(...)`
      // points at `generate`.
      auto e = std::make_unique<Expr>(Expr::Kind::Call, callee->loc);
      e->base = std::move(callee);
      if (call->argList())
        e->args = args(call->argList());
      return e;
    }
    if (auto *s = dynamic_cast<RLHFParser::SliceExprContext *>(c)) {
      auto e = std::make_unique<Expr>(Expr::Kind::Slice, loc(s));
      e->base = expr(s->expr(0));
      e->lo = expr(s->lo);
      e->hi = expr(s->hi);
      return e;
    }
    if (auto *n = dynamic_cast<RLHFParser::NegExprContext *>(c)) {
      auto e = std::make_unique<Expr>(Expr::Kind::Neg, loc(n));
      e->base = expr(n->expr());
      return e;
    }
    antlr4::Token *op = nullptr;
    std::vector<RLHFParser::ExprContext *> sides;
    if (auto *m = dynamic_cast<RLHFParser::MulExprContext *>(c)) {
      op = m->op;
      sides = m->expr();
    } else if (auto *a = dynamic_cast<RLHFParser::AddExprContext *>(c)) {
      op = a->op;
      sides = a->expr();
    } else if (auto *k = dynamic_cast<RLHFParser::CmpExprContext *>(c)) {
      op = k->op;
      sides = k->expr();
    }
    auto e = std::make_unique<Expr>(Expr::Kind::Binary, op ? loc(op) : loc(c));
    e->text = op ? op->getText() : "?";
    if (sides.size() == 2) {
      e->base = expr(sides[0]);
      e->hi = expr(sides[1]);
    }
    return e;
  }

  ExprPtr primary(RLHFParser::PrimaryContext *c) {
    if (auto *n = dynamic_cast<RLHFParser::NumberLitContext *>(c)) {
      auto e = std::make_unique<Expr>(Expr::Kind::Number, loc(n));
      std::string text = n->NUMBER()->getText();
      size_t unitAt = text.size();
      // The unit starts at the first letter that is not an exponent marker
      // followed by a digit or sign.
      for (size_t i = 0; i < text.size(); ++i) {
        char ch = text[i];
        if (!llvm::isAlpha(ch))
          continue;
        bool exponent = (ch == 'e' || ch == 'E') && i + 1 < text.size() &&
                        (llvm::isDigit(text[i + 1]) || text[i + 1] == '+' ||
                         text[i + 1] == '-');
        if (!exponent) {
          unitAt = i;
          break;
        }
        ++i;
      }
      std::string digits;
      for (char ch : text.substr(0, unitAt))
        if (ch != '_')
          digits += ch;
      e->text = text.substr(unitAt);
      e->number = std::strtod(digits.c_str(), nullptr);
      // 4096 and 1e3 are integers; 0.5 and 1.5e0 are not.
      e->isInteger = digits.find('.') == std::string::npos &&
                     e->number == std::floor(e->number);
      return e;
    }
    if (auto *s = dynamic_cast<RLHFParser::StringLitContext *>(c)) {
      auto e = std::make_unique<Expr>(Expr::Kind::String, loc(s));
      e->text = unquote(s->STRING()->getText());
      return e;
    }
    if (auto *b = dynamic_cast<RLHFParser::BoolLitContext *>(c)) {
      auto e = std::make_unique<Expr>(Expr::Kind::Bool, loc(b));
      e->boolean = b->TRUE() != nullptr;
      return e;
    }
    if (auto *n = dynamic_cast<RLHFParser::NameRefContext *>(c)) {
      auto e = std::make_unique<Expr>(Expr::Kind::Name, loc(n));
      e->text = n->name->getText();
      return e;
    }
    if (auto *p = dynamic_cast<RLHFParser::ParenExprContext *>(c))
      return expr(p->expr());
    auto *l = dynamic_cast<RLHFParser::ListLitContext *>(c);
    auto e = std::make_unique<Expr>(Expr::Kind::List, loc(c));
    if (l)
      for (auto *x : l->expr())
        e->elems.push_back(expr(x));
    return e;
  }
};

} // namespace

std::unique_ptr<Module> rlhfc::parseModule(llvm::SourceMgr &sm, unsigned bufferId,
                                           mlir::MLIRContext &ctx,
                                           const ParseLimits &limits) {
  const llvm::MemoryBuffer *buf = sm.getMemoryBuffer(bufferId);
  llvm::StringRef text = buf->getBuffer();
  llvm::StringRef filename = buf->getBufferIdentifier();
  auto fileLoc = [&](unsigned line, unsigned col) -> mlir::Location {
    return mlir::FileLineColLoc::get(&ctx, filename, line, col);
  };

  if (text.size() > limits.maxFileBytes) {
    mlir::emitError(fileLoc(1, 1))
        << llvm::formatv("file is {0:f1} MiB; rlhfc reads source files of at "
                         "most {1} MiB, split it into files joined with import",
                         text.size() / double(1 << 20), limits.maxFileBytes >> 20);
    return nullptr;
  }
  if (text.trim().empty()) {
    mlir::emitError(fileLoc(1, 1))
        << "file is empty; there is nothing to compile (see lang/README.md "
           "for what a program declares)";
    return nullptr;
  }
  // NUL bytes and invalid UTF-8 mean this is not program text at all.
  const auto *begin = reinterpret_cast<const llvm::UTF8 *>(text.data());
  const llvm::UTF8 *bad = begin;
  size_t nul = text.find('\0');
  if (nul != llvm::StringRef::npos ||
      !llvm::isLegalUTF8String(&bad, begin + text.size())) {
    size_t at = nul != llvm::StringRef::npos ? nul : size_t(bad - begin);
    auto lc = sm.getLineAndColumn(llvm::SMLoc::getFromPointer(text.data() + at),
                                  bufferId);
    mlir::emitError(fileLoc(lc.first, lc.second))
        << llvm::formatv("file is not UTF-8 text (byte 0x{0:x-2} at offset {1}); "
                         "is this really a .rlhf program?",
                         unsigned(static_cast<unsigned char>(text[at])), at);
    return nullptr;
  }

  Builder builder(ctx, filename);
  try {
    antlr4::ANTLRInputStream input(text.data(), text.size());
    RLHFLexer lexer(&input);
    lexer.removeErrorListeners();
    antlr4::CommonTokenStream tokens(&lexer);
    tokens.fill();
    builder.tokens = &tokens;
    if (auto err = scanTokens(tokens, builder, limits)) {
      mlir::emitError(err->loc) << err->message;
      return nullptr;
    }
    RLHFParser parser(&tokens);
    parser.removeErrorListeners();
    ErrorListener listener(builder);
    parser.addErrorListener(&listener);
    RLHFParser::ProgramContext *tree = parser.program();
    if (const auto &err = builder.firstError) {
      mlir::InFlightDiagnostic d = mlir::emitError(err->loc);
      d << err->message;
      if (err->noteLoc)
        d.attachNote(*err->noteLoc) << err->note;
      return nullptr;
    }
    return builder.build(tree);
  } catch (const std::exception &e) {
    mlir::emitError(fileLoc(1, 1)) << "internal parser error: " << e.what();
  } catch (...) {
    mlir::emitError(fileLoc(1, 1)) << "internal parser error";
  }
  return nullptr;
}

llvm::StringRef rlhfc::ast::entityKindName(EntityKind k) {
  switch (k) {
  case EntityKind::Hardware: return "hardware";
  case EntityKind::Arch: return "arch";
  case EntityKind::Cluster: return "cluster";
  case EntityKind::Model: return "model";
  case EntityKind::Dataset: return "dataset";
  }
  return "entity";
}
