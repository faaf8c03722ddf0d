//===- Frontend.h - load, parse and check a .rlhf program -------*- C++ -*-===//

#ifndef RLHFC_FRONTEND_FRONTEND_H
#define RLHFC_FRONTEND_FRONTEND_H

#include "rlhfc/Frontend/Parser.h"
#include "rlhfc/Frontend/Sema.h"

#include "llvm/Support/raw_ostream.h"

namespace rlhfc {

struct FrontendOptions {
  /// Searched after the importing file's folder, in order (`-I`).
  std::vector<std::string> includeDirs;
  /// Searched last: the installed standard library.
  std::string stdlibDir;
  /// Loads `prelude.rlhf` of the standard library after the program: the
  /// stdlib's estimators and losses (gae, ppo_actor_loss, ...) are then
  /// callable without an import.
  bool prelude = true;
  ParseLimits limits;
};

/// Parses the main buffer of `sm` and, transitively, every file it imports
/// (each added to `sm` so diagnostics can show its lines), then runs Sema.
/// Returns null after reporting errors through `ctx`'s diagnostic engine.
std::unique_ptr<sema::Program> loadProgram(llvm::SourceMgr &sm,
                                           mlir::MLIRContext &ctx,
                                           const FrontendOptions &opts);

/// The same, filling `program` as far as loading and checking get: the
/// modules that parsed and, when they all did, what Sema resolved. Tools that
/// work on programs with errors (the language server) read it either way.
mlir::LogicalResult loadProgram(llvm::SourceMgr &sm, mlir::MLIRContext &ctx,
                                const FrontendOptions &opts,
                                sema::Program &program);

/// The standard library folder: `flag` when not empty, else $RLHF_STDLIB,
/// else the one this build was configured with.
std::string defaultStdlibDir(llvm::StringRef flag);

/// Where `import "path";` in `fromFile` resolves to, or "" if nowhere.
std::string resolveImport(llvm::StringRef path, llvm::StringRef fromFile,
                          const FrontendOptions &opts);

/// Prints the main module's AST and every checked run, indented.
void dumpProgram(const sema::Program &p, llvm::raw_ostream &os);

} // namespace rlhfc

#endif // RLHFC_FRONTEND_FRONTEND_H
