//===- FnCodeCheck.cpp - the runtime's fn code parser, for the fuzzers ----===//
//
// Built with exceptions and RTTI (rlhf::Error is thrown), against the
// LibTorch headers FnProgram.h includes; nothing here calls into LibTorch,
// and neither does FnProgram.cpp, which is compiled beside this file.
//
//===----------------------------------------------------------------------===//

#include "FnCodeCheck.h"

#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/FnProgram.h"

#include <exception>

using namespace rlhf_fuzz;

static FnCodeKind kindOf(rlhf::FnKind k) {
  switch (k) {
  case rlhf::FnKind::Scalar:
    return FnCodeKind::Scalar;
  case rlhf::FnKind::PerSeq:
    return FnCodeKind::PerSeq;
  case rlhf::FnKind::PerToken:
    return FnCodeKind::PerToken;
  case rlhf::FnKind::Tokens:
    return FnCodeKind::Tokens;
  }
  return FnCodeKind::Scalar;
}

FnCodeSummary rlhf_fuzz::parseFnCode(std::string_view code) {
  FnCodeSummary s;
  try {
    rlhf::FnProgram f = rlhf::FnProgram::parse(code);
    s.name = f.name();
    s.loss = f.mode() == rlhf::FnProgram::Mode::Loss;
    for (int64_t i = 0; i < f.numInputs(); ++i)
      s.inputs.push_back(kindOf(f.inputKind(i)));
    s.outNames = f.outputNames();
    for (size_t i = 0; i < s.outNames.size(); ++i)
      s.outKinds.push_back(kindOf(f.outputKind(i)));
  } catch (const rlhf::Error &e) {
    s.error = e.what();
    if (s.error.empty())
      s.error = "(an rlhf::Error without a message)";
  }
  // Anything else (std::out_of_range from a bad index, ...) is a bug of the
  // parser: let it escape, and the fuzzer report it as a crash.
  return s;
}

const char *rlhf_fuzz::fnCodeKindName(FnCodeKind k) {
  return rlhf::fnKindName(rlhf::FnKind(int(k)));
}
