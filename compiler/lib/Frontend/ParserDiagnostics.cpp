//===- ParserDiagnostics.cpp - syntax errors in words ---------------------===//
//
// What the parser says when the text does not parse: the expected tokens in
// words, a missing ';' placed after the token it should follow, the brace
// left open, and the token-level limits checked before parsing. Built with
// exceptions and RTTI, as Parser.cpp is (ANTLR needs both).
//
//===----------------------------------------------------------------------===//

#include "ParserImpl.h"

#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/FormatVariadic.h"

#include <set>

using namespace rlhfc;
using namespace rlhfc::parser;
using rlhf::grammar::RLHFLexer;

namespace {

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
  bool expr = set.contains(size_t(RLHFLexer::NUMBER)) &&
              set.contains(size_t(RLHFLexer::IDENT)) &&
              set.contains(size_t(RLHFLexer::STRING));
  bool decl = set.contains(size_t(RLHFLexer::MODEL)) &&
              set.contains(size_t(RLHFLexer::ALGORITHM));
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

/// The token type the grammar spells as `literal` ("'}'"), or INVALID_TYPE.
size_t literalType(const antlr4::Parser &p, const std::string &literal) {
  const antlr4::dfa::Vocabulary &v = p.getVocabulary();
  for (size_t t = 1; t <= v.getMaxTokenType(); ++t)
    if (v.getLiteralName(t) == literal)
      return t;
  return antlr4::Token::INVALID_TYPE;
}

} // namespace

void ErrorListener::syntaxError(antlr4::Recognizer *recognizer,
                                antlr4::Token *offending, size_t line,
                                size_t col, const std::string &msg,
                                std::exception_ptr e) {
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

std::optional<SyntaxError>
rlhfc::parser::scanTokens(antlr4::CommonTokenStream &ts, SourcePositions &b,
                          const ParseLimits &limits) {
  unsigned depth = 0, stmtTokens = 0;
  constexpr unsigned kMaxStatementTokens = 4096;
  for (antlr4::Token *t : ts.getTokens()) {
    switch (t->getType()) {
    case RLHFLexer::ERRCHAR: {
      std::string text = t->getText();
      unsigned char c0 = text.empty() ? 0 : text[0];
      std::string shown =
          c0 >= 0x20 && c0 < 0x7f
              ? "'" + text + "'"
              : llvm::formatv(
                    "U+{0:X-4}",
                    [&] {
                      // Decode the one code point for display.
                      const llvm::UTF8 *src =
                          reinterpret_cast<const llvm::UTF8 *>(text.data());
                      llvm::UTF32 cp = 0;
                      llvm::UTF32 *dst = &cp;
                      llvm::ConvertUTF8toUTF32(&src, src + text.size(), &dst,
                                               dst + 1,
                                               llvm::lenientConversion);
                      return unsigned(cp);
                    }())
                    .str();
      return SyntaxError{b.loc(t),
                         "invalid character " + shown + " in program text"};
    }
    case RLHFLexer::UNTERMINATED_STRING:
      return SyntaxError{b.loc(t), "unterminated string; add the closing '\"' "
                                   "on the same line"};
    case RLHFLexer::UNTERMINATED_COMMENT:
      return SyntaxError{b.loc(t),
                         "unterminated '/*' comment; close it with '*/'"};
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
