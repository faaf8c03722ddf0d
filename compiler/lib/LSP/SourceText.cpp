//===- SourceText.cpp - positions and lexical scans of .rlhf text ---------===//

#include "SourceText.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace rlhfc::lsp;
namespace mlsp = mlir::lsp;

bool rlhfc::lsp::isNameChar(char c) { return llvm::isAlnum(c) || c == '_'; }

/// UTF-8 continuation bytes do not start a character.
static bool startsChar(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
}
/// Characters beyond the BMP are two UTF-16 code units.
static int utf16Units(char lead) {
  return static_cast<unsigned char>(lead) >= 0xF0 ? 2 : 1;
}

SourceText::SourceText(llvm::StringRef text) : buf(text) {
  lineStarts.push_back(0);
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n')
      lineStarts.push_back(i + 1);
}

size_t SourceText::offsetOf(unsigned line, unsigned column) const {
  if (line == 0)
    return 0;
  if (line > lineStarts.size())
    return buf.size();
  size_t i = lineStarts[line - 1];
  for (unsigned c = 1; c < column && i < buf.size() && buf[i] != '\n'; ++c) {
    ++i;
    while (i < buf.size() && !startsChar(buf[i]))
      ++i;
  }
  return i;
}

size_t SourceText::offsetOf(const mlsp::Position &pos) const {
  if (pos.line < 0)
    return 0;
  if (size_t(pos.line) >= lineStarts.size())
    return buf.size();
  size_t i = lineStarts[pos.line];
  for (int units = 0;
       units < pos.character && i < buf.size() && buf[i] != '\n';) {
    units += utf16Units(buf[i]);
    ++i;
    while (i < buf.size() && !startsChar(buf[i]))
      ++i;
  }
  return i;
}

mlsp::Position SourceText::positionOf(size_t offset) const {
  offset = std::min(offset, buf.size());
  auto it = std::upper_bound(lineStarts.begin(), lineStarts.end(), offset);
  size_t line = (it - lineStarts.begin()) - 1;
  int character = 0;
  for (size_t i = lineStarts[line]; i < offset; ++i)
    if (startsChar(buf[i]))
      character += utf16Units(buf[i]);
  return mlsp::Position(int(line), character);
}

size_t SourceText::skipCommentOrString(size_t i) const {
  if (buf.substr(i).starts_with("//")) {
    size_t nl = buf.find('\n', i);
    return nl == llvm::StringRef::npos ? buf.size() : nl;
  }
  if (buf.substr(i).starts_with("/*")) {
    size_t end = buf.find("*/", i + 2);
    return end == llvm::StringRef::npos ? buf.size() : end + 2;
  }
  if (i < buf.size() && buf[i] == '"') {
    for (size_t j = i + 1; j < buf.size(); ++j) {
      if (buf[j] == '\\')
        ++j;
      else if (buf[j] == '"')
        return j + 1;
      else if (buf[j] == '\n')
        // Unterminated: the string ends with its line (before a CRLF's \r).
        return j > i + 1 && buf[j - 1] == '\r' ? j - 1 : j;
    }
    return buf.size();
  }
  return i;
}

size_t SourceText::tokenEnd(size_t offset) const {
  if (offset >= buf.size())
    return buf.size();
  // At the end of a line (a missing ';'), an empty range that stays there.
  if (buf[offset] == '\n' || buf[offset] == '\r')
    return offset;
  if (buf[offset] == '"')
    return skipCommentOrString(offset);
  size_t i = offset;
  if (llvm::isDigit(buf[i])) {
    // Digits, '_', a fraction, an exponent and a unit suffix.
    while (i < buf.size() && (isNameChar(buf[i]) || buf[i] == '.' ||
                              ((buf[i] == '+' || buf[i] == '-') &&
                               (buf[i - 1] == 'e' || buf[i - 1] == 'E'))))
      ++i;
    return i;
  }
  while (i < buf.size() && isNameChar(buf[i]))
    ++i;
  if (i > offset)
    return i;
  i = offset + 1;
  while (i < buf.size() && !startsChar(buf[i]))
    ++i;
  return i;
}

size_t
SourceText::scanCode(size_t begin, size_t end,
                     llvm::function_ref<bool(size_t, char)> visit) const {
  end = std::min(end, buf.size());
  size_t i = begin;
  while (i < end) {
    size_t skipped = skipCommentOrString(i);
    if (skipped != i) {
      i = skipped;
      continue;
    }
    if (!visit(i, buf[i]))
      return i;
    ++i;
  }
  return std::min(i, end);
}

size_t SourceText::itemEnd(size_t offset, bool inList) const {
  int depth = 0;
  size_t end = buf.size();
  scanCode(offset, buf.size(), [&](size_t i, char c) {
    if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) { // the enclosing block ends first
        end = i;
        return false;
      }
      if (--depth == 0 && c == '}') {
        end = i + 1;
        return false;
      }
    } else if (depth == 0 && (c == ';' || (c == ',' && inList))) {
      end = c == ';' ? i + 1 : i;
      return false;
    }
    return true;
  });
  return end;
}

size_t SourceText::wordStart(size_t offset) const {
  size_t i = std::min(offset, buf.size());
  while (i > 0 && isNameChar(buf[i - 1]))
    --i;
  return i;
}

size_t SourceText::previousWordStart(size_t offset) const {
  size_t i = std::min(offset, buf.size());
  // Back over whitespace and `/* ... */` comments (`model /* c */ ref`).
  while (i > 0) {
    if (llvm::isSpace(buf[i - 1])) {
      --i;
    } else if (i >= 2 && buf.substr(i - 2, 2) == "*/") {
      size_t open = buf.substr(0, i - 2).rfind("/*");
      if (open == llvm::StringRef::npos)
        break;
      i = open;
    } else {
      break;
    }
  }
  return wordStart(i);
}

std::string SourceText::commentAbove(size_t offset) const {
  std::vector<llvm::StringRef> lines;
  for (size_t line = positionOf(offset).line; line > 0; --line) {
    llvm::StringRef text =
        buf.slice(lineStarts[line - 1], lineStarts[line]).trim();
    if (!text.consume_front("//"))
      break;
    text.consume_front(" ");
    lines.push_back(text);
  }
  std::string out;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (it != lines.rbegin())
      out += '\n';
    out += it->str();
  }
  return out;
}

bool SourceText::inCommentOrString(size_t offset) const {
  for (size_t i = 0; i < buf.size() && i < offset;) {
    size_t skipped = skipCommentOrString(i);
    if (skipped == i) {
      ++i;
      continue;
    }
    // A line comment and an unterminated string or comment also contain
    // the offset just past their end (the cursor typing into them).
    llvm::StringRef span = buf.slice(i, skipped);
    bool closed =
        span.size() >= 2 &&
        ((span.front() == '"' && span.back() == '"') ||
         (span.starts_with("/*") && span.size() >= 4 && span.ends_with("*/")));
    if (offset > i && (offset < skipped || (!closed && offset == skipped)))
      return true;
    i = skipped;
  }
  return false;
}

llvm::StringRef SourceText::nameAt(size_t begin) const {
  size_t end = begin;
  while (end < buf.size() && isNameChar(buf[end]))
    ++end;
  return buf.slice(begin, end);
}

std::optional<size_t> SourceText::openBrace(size_t offset) const {
  std::vector<size_t> open;
  scanCode(0, offset, [&](size_t i, char c) {
    if (c == '{')
      open.push_back(i);
    else if (c == '}' && !open.empty())
      open.pop_back();
    return true;
  });
  if (open.empty())
    return std::nullopt;
  return open.back();
}

size_t SourceText::declarationStart(size_t brace) const {
  size_t start = 0;
  int depth = 0;
  scanCode(0, brace, [&](size_t i, char c) {
    if (c == '{' || c == '(' || c == '[')
      ++depth;
    else if (c == '}' || c == ')' || c == ']')
      depth = std::max(0, depth - 1);
    if ((c == ';' || c == '}') && depth == 0)
      start = i + 1;
    return true;
  });
  std::optional<size_t> first;
  scanCode(start, brace, [&](size_t i, char c) {
    if (!isNameChar(c))
      return true;
    first = i;
    return false;
  });
  return first ? *first : brace;
}

char rlhfc::lsp::previousChar(llvm::StringRef src, size_t offset) {
  while (offset > 0 && llvm::isSpace(src[offset - 1]))
    --offset;
  return offset ? src[offset - 1] : 0;
}
