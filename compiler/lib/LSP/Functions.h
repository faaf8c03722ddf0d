//===- Functions.h - what the server knows of `fn` declarations -*- C++ -*-===//
//
// Functions written in the language (lang/README.md, chapter 6): their
// signatures as Sema prints them, their documentation (the `//` lines right
// above `fn`), the outputs a loss reads from the trained model and the types
// of parameters, for hover, completion and the outline.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_LIB_LSP_FUNCTIONS_H
#define RLHFC_LIB_LSP_FUNCTIONS_H

#include "Document.h"

namespace rlhfc::lsp {

/// `score[N]`, `logprobs[N, S]`, `number`.
std::string typeText(const ast::FnType &t);
/// `score[N]`, `number = 0.2`: a parameter's type and default.
std::string paramTypeText(const ast::FnParam &p);
/// "(score: score[N], group: int = 8) -> advantages[N]", as in Sema's errors.
std::string signatureOf(const ast::FnDecl &d);
/// `-> loss`: the function trains a model.
bool isLoss(const ast::FnDecl &d);

/// The documentation of `d`: the `//` comment lines right above its `fn`,
/// in whichever file declares it; "" when there are none.
std::string docOf(const Document &doc, const ast::FnDecl &d);
/// The value of a `let` in the main file, its whitespace collapsed:
/// "exp(lp - logprobs)".
std::string letValueText(const Document &doc, const ast::FnStmt &let);

/// The function of the main file whose declaration, from `fn` to its
/// closing `}`, contains `offset`.
const ast::FnDecl *enclosingFunction(const Document &doc, size_t offset);
/// The offset of the `{` that opens the body of `d`, a function of the main
/// file, or the end of the text.
size_t bodyBegin(const SourceText &text, const ast::FnDecl &d);

/// An output of the model a loss trains: model.`logprobs`(seq).
struct ModelOutputSpec {
  const char *name;
  const char *head;  ///< "lm" or "value"
  const char *shape; ///< "[N, S]"
  const char *summary;
};
llvm::ArrayRef<ModelOutputSpec> modelOutputs();
const ModelOutputSpec *lookupModelOutput(llvm::StringRef name);

/// A type of a parameter or result: `score`, `number`, `loss`...
struct FnTypeSpec {
  const char *name;
  const char *shape; ///< how it is written: "[N]", "[N, S]", ""
  const char *summary;
  bool result = false; ///< only a result (`loss`)
};
llvm::ArrayRef<FnTypeSpec> fnTypes();

/// The hover of a Function, Primitive, FnLocal or Output occurrence.
void functionHover(Document &doc, const Occurrence &o, llvm::raw_ostream &os);

} // namespace rlhfc::lsp

#endif // RLHFC_LIB_LSP_FUNCTIONS_H
