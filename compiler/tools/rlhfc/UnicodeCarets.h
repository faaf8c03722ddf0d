//===- UnicodeCarets.h - carets under lines with non-ASCII text -*- C++ -*-===//
//
// LLVM's SourceMgr prints no caret under a source line holding non-ASCII
// text (it counts bytes, not what a terminal shows), so an error in a line
// with an accented name or a CJK string had no caret. This handler prints
// those diagnostics itself, in SourceMgr's format, and leaves the rest to
// mlir::SourceMgrDiagnosticHandler.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_TOOLS_UNICODECARETS_H
#define RLHFC_TOOLS_UNICODECARETS_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace rlhfc {

class UnicodeCaretHandler {
public:
  /// Registered after (so tried before) the SourceMgr handler of `ctx`.
  UnicodeCaretHandler(llvm::SourceMgr &sm, mlir::MLIRContext *ctx,
                      llvm::raw_ostream &os = llvm::errs());
  ~UnicodeCaretHandler();

private:
  mlir::LogicalResult handle(mlir::Diagnostic &diag);
  void print(mlir::Location loc, llvm::StringRef severity,
             llvm::StringRef message);

  llvm::SourceMgr &sm;
  mlir::MLIRContext *ctx;
  llvm::raw_ostream &os;
  mlir::DiagnosticEngine::HandlerID id;
};

} // namespace rlhfc

#endif // RLHFC_TOOLS_UNICODECARETS_H
