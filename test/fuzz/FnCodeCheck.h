//===- FnCodeCheck.h - the runtime's fn code parser -------------*- C++ -*-===//
//
// FnCodeCheck.cpp compiles the runtime's own parser and verifier of fn code
// (runtime/lib/FnProgram.cpp) into the fuzz targets: that file reads no
// tensor, so it links without LibTorch (only its headers are needed), and
// its exceptions stay inside FnCodeCheck.cpp. This header is free of both,
// so the compiler-side fuzz code includes it as is.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_TEST_FUZZ_FNCODECHECK_H
#define RLHF_TEST_FUZZ_FNCODECHECK_H

#include <string>
#include <string_view>
#include <vector>

namespace rlhf_fuzz {

/// The kinds of rlhf::FnKind, in its order.
enum class FnCodeKind { Scalar, PerSeq, PerToken, Tokens };

/// What the runtime makes of one fn code text.
struct FnCodeSummary {
  std::string error; ///< rlhf::Error's message; empty when parse accepted it
  std::string name;
  bool loss = false;
  std::vector<FnCodeKind> inputs;
  std::vector<std::string> outNames;
  std::vector<FnCodeKind> outKinds;
};

/// Runs rlhf::FnProgram::parse, as the runtime does at a call's first use.
FnCodeSummary parseFnCode(std::string_view code);

const char *fnCodeKindName(FnCodeKind k);

} // namespace rlhf_fuzz

#endif // RLHF_TEST_FUZZ_FNCODECHECK_H
