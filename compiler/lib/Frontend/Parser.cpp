//===- Parser.cpp - .rlhf source to AST through ANTLR4 --------------------===//
//
// ANTLR throws and needs RTTI; this file is built with both and catches
// everything before returning, so no exception reaches LLVM frames.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/Frontend/Parser.h"

#include "RLHFLexer.h"
#include "RLHFParser.h"
#include "antlr4-runtime.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <set>

using namespace rlhfc;
using namespace rlhfc::ast;
using rlhf::grammar::RLHFLexer;
using rlhf::grammar::RLHFParser;

namespace {

struct SyntaxError {
  mlir::Location loc;
  std::string message;
  std::optional<mlir::Location> noteLoc; ///< e.g. the '{' left open
  std::string note;
};

/// Describes a token the way a person would: "name 'foo'", "';'", "end of
/// file".
std::string describeToken(const antlr4::Token *t) {
  if (!t || t->getType() == antlr4::Token::EOF)
    return "end of file";
  std::string text = t->getText();
  if (text.size() > 24)
    text = text.substr(0, 21) + "...";
  switch (t->getType()) {
  case RLHFLexer::IDENT:
    return "name '" + text + "'";
  case RLHFLexer::NUMBER:
    return "number '" + text + "'";
  case RLHFLexer::STRING:
    return "string " + text;
  default:
    break;
  }
  if (t->getType() >= RLHFLexer::IMPORT && t->getType() <= RLHFLexer::FALSE)
    return "keyword '" + text + "'";
  return "'" + text + "'";
}

/// Turns ANTLR's expected-token set into words, folding the tokens that can
/// start an expression or a declaration into one phrase each.
std::string describeExpected(const antlr4::misc::IntervalSet &set,
                             const antlr4::dfa::Vocabulary &vocab) {
  std::vector<std::string> parts;
  bool expr = set.contains(size_t(RLHFLexer::NUMBER)) && set.contains(size_t(RLHFLexer::IDENT)) &&
              set.contains(size_t(RLHFLexer::STRING));
  bool decl = set.contains(size_t(RLHFLexer::MODEL)) && set.contains(size_t(RLHFLexer::ALGORITHM));
  if (decl)
    parts.push_back("a declaration (import, hardware, arch, cluster, model, "
                    "dataset, algorithm, fn or run)");
  if (expr)
    parts.push_back("an expression");
  for (ssize_t t : set.toList()) {
    if (expr && (t == RLHFLexer::NUMBER || t == RLHFLexer::STRING ||
                 t == RLHFLexer::TRUE || t == RLHFLexer::FALSE ||
                 t == RLHFLexer::IDENT || t == RLHFLexer::MODEL))
      continue;
    if (decl &&
        ((t >= RLHFLexer::IMPORT && t <= RLHFLexer::RUN) || t == RLHFLexer::FN))
      continue;
    // Where a name is expected, the keywords allowed as property names are
    // just names; listing them would only confuse.
    if (!decl && set.contains(size_t(RLHFLexer::IDENT)) &&
        t >= RLHFLexer::HARDWARE && t <= RLHFLexer::DATASET)
      continue;
    if (t == ssize_t(antlr4::Token::EOF)) {
      parts.push_back("end of file");
      continue;
    }
    std::string lit = vocab.getLiteralName(t);
    if (expr && (lit == "'('" || lit == "'['" || lit == "'-'"))
      continue;
    if (!lit.empty())
      parts.push_back(lit);
    else if (t == RLHFLexer::IDENT)
      parts.push_back("a name");
    else if (t == RLHFLexer::STRING)
      parts.push_back("a string");
    else if (t == RLHFLexer::NUMBER)
      parts.push_back("a number");
  }
  if (parts.empty())
    return "";
  if (parts.size() == 1)
    return parts[0];
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i)
      s += i + 1 == parts.size() ? " or " : ", ";
    s += parts[i];
  }
  return s;
}

class Builder;

/// Records the first syntax error in words a person understands.
class ErrorListener : public antlr4::BaseErrorListener {
public:
  ErrorListener(Builder &b) : b(b) {}
  void syntaxError(antlr4::Recognizer *recognizer, antlr4::Token *offending,
                   size_t line, size_t col, const std::string &msg,
                   std::exception_ptr e) override;

private:
  Builder &b;
};

/// Builds the AST from the parse tree.
class Builder {
public:
  Builder(mlir::MLIRContext &ctx, llvm::StringRef filename)
      : ctx(ctx), filename(mlir::StringAttr::get(&ctx, filename)) {}

  mlir::Location loc(size_t line, size_t col) {
    return mlir::FileLineColLoc::get(filename, line, col + 1);
  }
  mlir::Location loc(const antlr4::Token *t) {
    return loc(t->getLine(), t->getCharPositionInLine());
  }
  mlir::Location loc(antlr4::ParserRuleContext *c) { return loc(c->getStart()); }
  mlir::Location loc(antlr4::tree::TerminalNode *n) { return loc(n->getSymbol()); }
  /// The position just after token `t`, for "expected ';'" errors.
  /// Columns count characters (ANTLR's code points), not UTF-8 bytes.
  mlir::Location locAfter(const antlr4::Token *t) {
    std::string text = t->getText();
    auto chars = [](llvm::StringRef s) {
      return size_t(llvm::count_if(s, [](char c) {
        return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
      }));
    };
    size_t nl = text.rfind('\n');
    if (nl == std::string::npos)
      return loc(t->getLine(), t->getCharPositionInLine() + chars(text));
    return loc(t->getLine() + std::count(text.begin(), text.end(), '\n'),
               chars(llvm::StringRef(text).drop_front(nl + 1)));
  }

  void error(mlir::Location l, std::string msg) {
    if (!firstError)
      firstError = SyntaxError{l, std::move(msg)};
  }

  std::optional<SyntaxError> firstError;
  antlr4::CommonTokenStream *tokens = nullptr;

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

  mlir::MLIRContext &ctx;
  mlir::StringAttr filename;
};

/// The token type the grammar spells as `literal` ("'}'"), or INVALID_TYPE.
size_t literalType(const antlr4::Parser &p, const std::string &literal) {
  const antlr4::dfa::Vocabulary &v = p.getVocabulary();
  for (size_t t = 1; t <= v.getMaxTokenType(); ++t)
    if (v.getLiteralName(t) == literal)
      return t;
  return antlr4::Token::INVALID_TYPE;
}

void ErrorListener::syntaxError(antlr4::Recognizer *recognizer,
                                antlr4::Token *offending, size_t line, size_t col,
                                const std::string &msg, std::exception_ptr e) {
  if (b.firstError)
    return;
  auto *parser = dynamic_cast<antlr4::Parser *>(recognizer);
  if (!parser) {
    b.error(b.loc(line, col), "invalid input");
    return;
  }
  antlr4::misc::IntervalSet expected;
  try {
    if (e)
      std::rethrow_exception(e);
    expected = parser->getExpectedTokens();
  } catch (const antlr4::RecognitionException &re) {
    expected = re.getExpectedTokens();
  } catch (...) {
  }
  std::string want = describeExpected(expected, parser->getVocabulary());

  // A missing ';' is reported right after the previous token, where the
  // person forgot it, rather than at the start of the next line.
  if (expected.contains(size_t(RLHFLexer::SEMI)) && b.tokens && offending) {
    antlr4::Token *prev = nullptr;
    for (ssize_t i = ssize_t(offending->getTokenIndex()) - 1; i >= 0; --i) {
      antlr4::Token *t = b.tokens->get(i);
      if (t->getChannel() == antlr4::Token::DEFAULT_CHANNEL) {
        prev = t;
        break;
      }
    }
    if (prev && (prev->getLine() < offending->getLine() ||
                 offending->getType() == antlr4::Token::EOF)) {
      b.error(b.locAfter(prev), "expected ';' after " + describeToken(prev));
      return;
    }
  }
  std::string m = "unexpected " + describeToken(offending);
  if (!want.empty())
    m += "; expected " + want;
  // `let` and `return` belong to fn bodies; an algorithm's step names its
  // result without a keyword.
  if (offending && !expected.contains(size_t(RLHFLexer::LET)) &&
      (offending->getType() == RLHFLexer::LET ||
       offending->getType() == RLHFLexer::RETURN) &&
      expected.contains(size_t(RLHFLexer::IDENT)))
    m += llvm::formatv(
             "; '{0}' is for fn bodies: an algorithm's step is written "
             "'NAME = CALL;' (or 'CALL;')",
             offending->getText())
             .str();
  b.error(b.loc(line, col), m);
  // At the end of the file, or at the next declaration's keyword, say
  // which brace is still open: the place to fix is there.
  static const std::set<std::string> kDeclKeywords = {
      "import",  "hardware",  "arch", "cluster", "model",
      "dataset", "algorithm", "fn",   "run"};
  bool atDeclaration =
      offending && (offending->getType() == antlr4::Token::EOF ||
                    (offending->getCharPositionInLine() == 0 &&
                     kDeclKeywords.count(offending->getText())));
  if (atDeclaration && b.tokens &&
      expected.contains(literalType(*parser, "'}'"))) {
    std::vector<antlr4::Token *> open;
    for (antlr4::Token *t : b.tokens->getTokens()) {
      if (t->getTokenIndex() >= offending->getTokenIndex())
        break;
      std::string text = t->getText();
      if (t->getChannel() != antlr4::Token::DEFAULT_CHANNEL)
        continue;
      if (text == "{")
        open.push_back(t);
      else if (text == "}" && !open.empty())
        open.pop_back();
    }
    if (!open.empty()) {
      b.firstError->noteLoc = b.loc(open.back());
      b.firstError->note = "this '{' is not closed";
    }
  }
}

/// Rejects what the grammar cannot sensibly parse: stray characters,
/// unterminated strings and comments, and nesting deep enough to exhaust the
/// stack.
std::optional<SyntaxError> scanTokens(antlr4::CommonTokenStream &ts, Builder &b,
                                      const ParseLimits &limits) {
  unsigned depth = 0, stmtTokens = 0;
  constexpr unsigned kMaxStatementTokens = 4096;
  for (antlr4::Token *t : ts.getTokens()) {
    switch (t->getType()) {
    case RLHFLexer::ERRCHAR: {
      std::string text = t->getText();
      unsigned char c0 = text.empty() ? 0 : text[0];
      std::string shown = c0 >= 0x20 && c0 < 0x7f
                              ? "'" + text + "'"
                              : llvm::formatv("U+{0:X-4}", [&] {
                                  // Decode the one code point for display.
                                  const llvm::UTF8 *src =
                                      reinterpret_cast<const llvm::UTF8 *>(text.data());
                                  llvm::UTF32 cp = 0;
                                  llvm::UTF32 *dst = &cp;
                                  llvm::ConvertUTF8toUTF32(
                                      &src, src + text.size(), &dst, dst + 1,
                                      llvm::lenientConversion);
                                  return unsigned(cp);
                                }())
                                    .str();
      return SyntaxError{b.loc(t), "invalid character " + shown +
                                       " in program text"};
    }
    case RLHFLexer::UNTERMINATED_STRING:
      return SyntaxError{b.loc(t), "unterminated string; add the closing '\"' "
                                   "on the same line"};
    case RLHFLexer::UNTERMINATED_COMMENT:
      return SyntaxError{b.loc(t), "unterminated '/*' comment; close it with '*/'"};
    default:
      break;
    }
    if (t->getChannel() != antlr4::Token::DEFAULT_CHANNEL)
      continue;
    std::string text = t->getText();
    if (text == "(" || text == "[" || text == "{") {
      if (++depth > limits.maxNesting)
        return SyntaxError{b.loc(t),
                           llvm::formatv("brackets nested more than {0} deep; "
                                         "simplify the expression",
                                         limits.maxNesting)};
    } else if ((text == ")" || text == "]" || text == "}") && depth) {
      --depth;
    }
    if (text == ";" || text == "{" || text == "}")
      stmtTokens = 0;
    else if (++stmtTokens > kMaxStatementTokens)
      return SyntaxError{b.loc(t), llvm::formatv("statement longer than {0} "
                                                 "tokens; split it up",
                                                 kMaxStatementTokens)};
  }
  return std::nullopt;
}

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
