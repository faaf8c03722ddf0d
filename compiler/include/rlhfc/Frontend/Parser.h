//===- Parser.h - .rlhf source to AST ---------------------------*- C++ -*-===//

#ifndef RLHFC_FRONTEND_PARSER_H
#define RLHFC_FRONTEND_PARSER_H

#include "rlhfc/Frontend/AST.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/SourceMgr.h"

namespace rlhfc {

/// Limits that keep hostile input from exhausting time or stack.
struct ParseLimits {
  size_t maxFileBytes = 4u << 20;
  unsigned maxNesting = 256;
};

/// Parses buffer `bufferId` of `sm`. Syntax errors are emitted through the
/// context's diagnostic engine at their source location; returns null after
/// an error. Never throws.
std::unique_ptr<ast::Module> parseModule(llvm::SourceMgr &sm, unsigned bufferId,
                                         mlir::MLIRContext &ctx,
                                         const ParseLimits &limits = {});

} // namespace rlhfc

#endif // RLHFC_FRONTEND_PARSER_H
