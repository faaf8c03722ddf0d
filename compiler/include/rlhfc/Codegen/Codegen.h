//===- Codegen.h - from planned rlhf IR to an executable --------*- C++ -*-===//
//
// Three steps, each reachable from rlhfc's --emit: lower the planned module
// to the LLVM dialect (rlhf-lower-to-runtime plus MLIR's conversions),
// translate to LLVM IR and emit a native object through LLVM's
// TargetMachine, then link it with the system compiler driver against
// librlhf_runtime.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_CODEGEN_CODEGEN_H
#define RLHFC_CODEGEN_CODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <memory>
#include <string>

namespace rlhfc::codegen {

/// Registers what the LLVM-dialect lowering and translation need.
void registerCodegenDialects(mlir::DialectRegistry &registry);

/// Runs rlhf-lower-to-runtime and the conversions to the LLVM dialect on a
/// planned module. Errors are reported through the context's handler.
mlir::LogicalResult lowerToLLVMDialect(mlir::ModuleOp module);

/// Translates an LLVM-dialect module to LLVM IR for the host target.
std::unique_ptr<llvm::Module> translateToLLVMIR(mlir::ModuleOp module,
                                                llvm::LLVMContext &llvmCtx,
                                                std::string &error);

/// Writes a native object file of `m` (optimised at -O2).
mlir::LogicalResult emitObject(llvm::Module &m, llvm::StringRef path,
                               std::string &error);

struct LinkOptions {
  std::string runtimeLibDir; ///< where librlhf_runtime.so is
  std::string linker;        ///< compiler driver; empty: $CC, else cc
};

/// The folder of librlhf_runtime next to a tool: <bindir>/../lib.
std::string defaultRuntimeLibDir(const char *argv0, void *mainAddr);

/// Links `object` into the executable `output`.
mlir::LogicalResult linkExecutable(llvm::StringRef object,
                                   llvm::StringRef output,
                                   const LinkOptions &opts, std::string &error);

} // namespace rlhfc::codegen

#endif // RLHFC_CODEGEN_CODEGEN_H
