//===- PromptTemplate.h - a dataset's prompt template (private) -*- C++ -*-===//
//
// Where in the source a template's characters are, for Sema's errors; the
// syntax itself is rlhf/runtime/PromptTemplate.h, shared with the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_LIB_FRONTEND_PROMPTTEMPLATE_H
#define RLHFC_LIB_FRONTEND_PROMPTTEMPLATE_H

#include <cstddef>
#include <string>
#include <vector>

namespace rlhfc::sema::detail {

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
