//===- PromptTemplate.cpp - the syntax of dataset prompt templates --------===//

#include "rlhf/runtime/PromptTemplate.h"

using namespace rlhf;

const char *TemplateSyntax::what() const {
  switch (kind) {
  case Ok:
    return "ok";
  case Unclosed:
    return "unclosed '{'";
  case Stray:
    return "stray '}'";
  case Empty:
    return "empty placeholder";
  }
  return "?";
}

TemplateSyntax rlhf::parsePromptTemplate(const std::string &text,
                                         std::vector<TemplatePiece> &pieces) {
  std::string lit;
  auto flush = [&] {
    if (!lit.empty())
      pieces.push_back({std::move(lit), false, 0});
    lit.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    bool twice = i + 1 < text.size() && text[i + 1] == c;
    if (c == '}' && !twice)
      return {TemplateSyntax::Stray, i};
    if (c != '{' || twice) { // a literal character, or an escaped brace
      lit += c;
      i += twice;
      continue;
    }
    size_t close = text.find_first_of("{}", i + 1);
    if (close == std::string::npos || text[close] == '{')
      return {TemplateSyntax::Unclosed, i};
    if (close == i + 1)
      return {TemplateSyntax::Empty, i};
    flush();
    pieces.push_back({text.substr(i + 1, close - i - 1), true, i});
    i = close;
  }
  flush();
  return {};
}
