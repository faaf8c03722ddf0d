//===- FrontendFuzzer.cpp - libFuzzer target over parse + sema ------------===//
//
// Built as a real fuzzer with the `fuzz` preset (clang, -fsanitize=fuzzer),
// and in every build as a replay tool that runs the seed corpus, so a crash
// the fuzzer once found stays fixed.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/Frontend/Frontend.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic &) {
    return mlir::success();
  });
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.rlhf"),
      llvm::SMLoc());
  rlhfc::FrontendOptions opts;
  opts.stdlibDir = RLHF_STDLIB_DIR;
  (void)rlhfc::loadProgram(sm, ctx, opts);
  return 0;
}
