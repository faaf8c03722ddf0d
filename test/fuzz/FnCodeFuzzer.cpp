//===- FnCodeFuzzer.cpp - libFuzzer target over the fn code parser --------===//
//
// The bytes are fn code (runtime/include/rlhf/runtime/FnProgram.h), as an
// executable embeds it: rlhf::FnProgram::parse must accept it or throw an
// rlhf::Error, never crash, hang or throw anything else. Seeded with the fn
// code the compiler emits for the .rlhf corpus (corpus-fncode/, written by
// the pipeline target with RLHF_FUZZ_FNCODE_DIR). Whether the runtime
// accepts every fn code the compiler emits is checked by the pipeline
// target.
//
//===----------------------------------------------------------------------===//

#include "FnCodeCheck.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rlhf_fuzz::FnCodeSummary s = rlhf_fuzz::parseFnCode(
      std::string_view(reinterpret_cast<const char *>(data), size));
  // What parse accepted must be self-consistent.
  if (s.error.empty() &&
      (s.outNames.empty() || s.outNames.size() != s.outKinds.size() ||
       (s.loss && s.outKinds[0] != rlhf_fuzz::FnCodeKind::Scalar)))
    __builtin_trap();
  return 0;
}
