//===- FrontendFuzzer.cpp - libFuzzer target over parse + sema ------------===//
//
// Built as a real fuzzer with the `fuzz` preset (clang, -fsanitize=fuzzer),
// and in every build as a replay tool that runs the seed corpus, so a crash
// the fuzzer once found stays fixed.
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"

#include "mlir/IR/Diagnostics.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic &) {
    return mlir::success();
  });
  llvm::SourceMgr sm;
  (void)loadFuzzInput(sm, ctx, data, size);
  return 0;
}
