//===- ParserImpl.h - shared by the parser's files --------------*- C++ -*-===//
//
// Where tokens are in the source, and the first syntax error: what the AST
// builder (Parser.cpp) and the error wording (ParserDiagnostics.cpp) share.
// Includes ANTLR's headers: only files built with exceptions and RTTI may
// include it.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_FRONTEND_PARSERIMPL_H
#define RLHFC_FRONTEND_PARSERIMPL_H

#include "rlhfc/Frontend/Parser.h"

#include "RLHFLexer.h"
#include "RLHFParser.h"
#include "antlr4-runtime.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"

#include <optional>
#include <string>

namespace rlhfc::parser {

struct SyntaxError {
  mlir::Location loc;
  std::string message;
  std::optional<mlir::Location> noteLoc; ///< e.g. the '{' left open
  std::string note;
};

/// Source locations of tokens, and the first syntax error found.
class SourcePositions {
public:
  SourcePositions(mlir::MLIRContext &ctx, llvm::StringRef filename)
      : ctx(ctx), filename(mlir::StringAttr::get(&ctx, filename)) {}

  mlir::Location loc(size_t line, size_t col) {
    return mlir::FileLineColLoc::get(filename, line, col + 1);
  }
  mlir::Location loc(const antlr4::Token *t) {
    return loc(t->getLine(), t->getCharPositionInLine());
  }
  mlir::Location loc(antlr4::ParserRuleContext *c) {
    return loc(c->getStart());
  }
  mlir::Location loc(antlr4::tree::TerminalNode *n) {
    return loc(n->getSymbol());
  }
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

protected:
  mlir::MLIRContext &ctx;
  mlir::StringAttr filename;
};

/// Records the first syntax error in words a person understands.
class ErrorListener : public antlr4::BaseErrorListener {
public:
  ErrorListener(SourcePositions &b) : b(b) {}
  void syntaxError(antlr4::Recognizer *recognizer, antlr4::Token *offending,
                   size_t line, size_t col, const std::string &msg,
                   std::exception_ptr e) override;

private:
  SourcePositions &b;
};

/// Rejects what the grammar cannot sensibly parse: stray characters,
/// unterminated strings and comments, and nesting deep enough to exhaust the
/// stack.
std::optional<SyntaxError> scanTokens(antlr4::CommonTokenStream &ts,
                                      SourcePositions &b,
                                      const ParseLimits &limits);

} // namespace rlhfc::parser

#endif // RLHFC_FRONTEND_PARSERIMPL_H
