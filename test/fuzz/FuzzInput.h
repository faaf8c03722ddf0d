//===- FuzzInput.h - a fuzz input through the frontend ----------*- C++ -*-===//
//
// Shared by the fuzz targets: the bytes become the file "fuzz.rlhf", read
// against the real stdlib.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_TEST_FUZZ_FUZZINPUT_H
#define RLHF_TEST_FUZZ_FUZZINPUT_H

#include "rlhfc/Frontend/Frontend.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cstddef>
#include <cstdint>
#include <memory>

inline std::unique_ptr<rlhfc::sema::Program>
loadFuzzInput(llvm::SourceMgr &sm, mlir::MLIRContext &ctx, const uint8_t *data,
              size_t size) {
  sm.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.rlhf"),
      llvm::SMLoc());
  rlhfc::FrontendOptions opts;
  opts.stdlibDir = RLHF_STDLIB_DIR;
  return rlhfc::loadProgram(sm, ctx, opts);
}

#endif // RLHF_TEST_FUZZ_FUZZINPUT_H
