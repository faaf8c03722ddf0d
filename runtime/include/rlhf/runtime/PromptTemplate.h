//===- PromptTemplate.h - the syntax of dataset prompt templates -*- C++
//-*-===//
//
// A dataset's `template`: text with `{column}` placeholders and `{{`, `}}`
// for literal braces. One parser for the compiler (which reports errors at
// the character) and the runtime (which renders rows); torch-free, in the
// library both link.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_PROMPTTEMPLATE_H
#define RLHF_RUNTIME_PROMPTTEMPLATE_H

#include <cstddef>
#include <string>
#include <vector>

namespace rlhf {

/// Literal text, or a `{column}` placeholder.
struct TemplatePiece {
  std::string text; ///< the literal text (braces unescaped), or the column
  bool column = false;
  size_t offset = 0; ///< of the placeholder's `{` in the template
};

/// What is wrong with a template, and the offset of the brace at fault.
struct TemplateSyntax {
  enum Kind { Ok, Unclosed, Stray, Empty } kind = Ok;
  size_t offset = 0;
  /// "unclosed '{'", "stray '}'", "empty placeholder".
  const char *what() const;
};

/// Splits `text` into pieces; stops at the first syntax error.
TemplateSyntax parsePromptTemplate(const std::string &text,
                                   std::vector<TemplatePiece> &pieces);

} // namespace rlhf

#endif // RLHF_RUNTIME_PROMPTTEMPLATE_H
