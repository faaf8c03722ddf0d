//===- SourceText.h - positions and lexical scans of .rlhf text -*- C++ -*-===//
//
// The frontend locates source by 1-based line and character column, LSP by
// 0-based line and UTF-16 offset, and the text is UTF-8. SourceText converts
// between them, and finds the extent of tokens, statements and blocks by
// scanning the text, so that features work on text that does not parse.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_LIB_LSP_SOURCETEXT_H
#define RLHFC_LIB_LSP_SOURCETEXT_H

#include "mlir/IR/Location.h"
#include "mlir/Tools/lsp-server-support/Protocol.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace rlhfc::lsp {

class SourceText {
public:
  explicit SourceText(llvm::StringRef text);

  llvm::StringRef text() const { return buf; }

  /// Byte offset of a frontend position (1-based line, column in
  /// characters), clamped to the end of its line.
  size_t offsetOf(unsigned line, unsigned column) const;
  size_t offsetOf(mlir::FileLineColLoc loc) const {
    return offsetOf(loc.getLine(), loc.getColumn());
  }
  /// Byte offset of an LSP position, clamped to the end of its line.
  size_t offsetOf(const mlir::lsp::Position &pos) const;

  mlir::lsp::Position positionOf(size_t offset) const;
  mlir::lsp::Range rangeOf(size_t begin, size_t end) const {
    return {positionOf(begin), positionOf(end)};
  }

  /// End of the token that starts at `offset`: a name, a number with its
  /// unit, a string, or else one character.
  size_t tokenEnd(size_t offset) const;

  /// End of the item (declaration, property, statement) starting at
  /// `offset`: just past its `;` or past the `}` closing its block, whichever
  /// comes first outside brackets; at the `}` of an enclosing block otherwise.
  /// In a list (`inList`), also at a `,` or the `)` that closes the list.
  size_t itemEnd(size_t offset, bool inList = false) const;

  /// Start of the word (letters, digits, `_`) that ends at `offset`.
  size_t wordStart(size_t offset) const;
  /// Start of the word before `offset`, across whitespace: the keyword
  /// `model` for the offset of `actor` in `model actor`.
  size_t previousWordStart(size_t offset) const;

  /// The `//` comment lines right above the line of `offset`, up to a line
  /// that is not one, without their `//` and the space after it: the
  /// documentation of a declaration. Lines are joined by '\n'.
  std::string commentAbove(size_t offset) const;

  /// Whether `offset` lies inside a comment or a string literal.
  bool inCommentOrString(size_t offset) const;

  /// The offset after the comment or string starting at `i`, or `i`.
  size_t skipCommentOrString(size_t i) const;

  /// Calls `visit(offset, char)` for each character in [begin, end) outside
  /// comments and strings, until it returns false. Returns where it stopped.
  size_t scanCode(size_t begin, size_t end,
                  llvm::function_ref<bool(size_t, char)> visit) const;

  /// The name (letters, digits, `_`) that starts at `begin`.
  llvm::StringRef nameAt(size_t begin) const;
  /// The `{` of the innermost block `offset` is inside, if any.
  std::optional<size_t> openBrace(size_t offset) const;
  /// Where the declaration whose block opens at `brace` starts: its first
  /// name after the `;` or `}` that ends the item before it (`brace` when
  /// there is none).
  size_t declarationStart(size_t brace) const;
  /// That declaration's keyword (`run`, `dataset`, ...).
  llvm::StringRef declarationKeyword(size_t brace) const {
    return nameAt(declarationStart(brace));
  }
  /// Whether it is `name : base {`, taking what it does not set from its
  /// base (a model from its arch).
  bool declarationHasBase(size_t brace) const {
    return buf.slice(declarationStart(brace), brace).contains(':');
  }

private:
  llvm::StringRef buf;
  std::vector<size_t> lineStarts;
};

bool isNameChar(char c);

/// The last character before `offset` that is not whitespace, or 0.
char previousChar(llvm::StringRef src, size_t offset);

} // namespace rlhfc::lsp

#endif // RLHFC_LIB_LSP_SOURCETEXT_H
