//===- PromptTemplate.h - a dataset's prompt template (private) -*- C++ -*-===//
//
// The syntax of a dataset's `template`: text with `{column}` placeholders,
// `{{` and `}}` for literal braces. Sema checks it here; the runtime has its
// own renderer (runtime/lib/Dataset.cpp) for the same syntax.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_LIB_FRONTEND_PROMPTTEMPLATE_H
#define RLHFC_LIB_FRONTEND_PROMPTTEMPLATE_H

#include <cstddef>
#include <string>
#include <vector>

namespace rlhfc::sema::detail {

/// A `{name}` placeholder: its name and the offset of its `{` in the text.
struct Placeholder {
  std::string name;
  size_t offset = 0;
};

/// A malformed template: what is wrong and the offset it is at.
struct TemplateError {
  enum Kind { None, Unclosed, Stray, Empty } kind = None;
  size_t offset = 0;
};

/// Splits `text` into its placeholders; stops at the first syntax error.
inline TemplateError scanTemplate(const std::string &text,
                                  std::vector<Placeholder> &out) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '}') {
      if (i + 1 < text.size() && text[i + 1] == '}') {
        ++i;
        continue;
      }
      return {TemplateError::Stray, i};
    }
    if (text[i] != '{')
      continue;
    if (i + 1 < text.size() && text[i + 1] == '{') {
      ++i;
      continue;
    }
    size_t close = text.find_first_of("{}", i + 1);
    if (close == std::string::npos || text[close] == '{')
      return {TemplateError::Unclosed, i};
    if (close == i + 1)
      return {TemplateError::Empty, i};
    out.push_back({text.substr(i + 1, close - i - 1), i});
    i = close;
  }
  return {};
}

/// The source columns that the first `offset` bytes of a string's value take
/// between its quotes: `"`, `\`, newline and tab were written as two-character
/// escapes, and a UTF-8 character counts once.
inline unsigned sourceColumns(const std::string &value, size_t offset) {
  unsigned cols = 0;
  for (size_t i = 0; i < offset && i < value.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c == '"' || c == '\\' || c == '\n' || c == '\t')
      cols += 2;
    else if ((c & 0xC0) != 0x80)
      cols += 1;
  }
  return cols;
}

} // namespace rlhfc::sema::detail

#endif // RLHFC_LIB_FRONTEND_PROMPTTEMPLATE_H
