//===- FnTestUtil.h - helpers of the fn code tests --------------*- C++ -*-===//
//
// Shared by FnProgramTest.cpp (verifier, ops) and FnBuiltinsTest.cpp (the
// stdlib's re-expressions of the built-ins against the C++).
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_TEST_UNIT_FNTESTUTIL_H
#define RLHF_TEST_UNIT_FNTESTUTIL_H

#include "../../runtime/lib/ProgramState.h" // rlhf_prog, rlhf_value
#include "StdlibFns.h"

#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/FnProgram.h"
#include "rlhf/runtime/Model.h"
#include "rlhf/runtime/Train.h"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <unistd.h>

namespace rlhf::fntest {

using rlhf::testfns::stdlibProgram;

/// The header `rlhf.fn 1 f MODE`, then `lines`: line k of the program is
/// lines[k - 2].
inline std::string program(const char *mode,
                           std::initializer_list<const char *> lines) {
  std::string s = std::string("rlhf.fn 1 f ") + mode;
  for (const char *l : lines)
    s += std::string("\n") + l;
  return s;
}

/// The verifier's message for `code`, or "" when it is accepted.
inline std::string errorOf(const std::string &code) {
  try {
    FnProgram::parse(code);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

/// A program the verifier rejects, and the message it gives.
struct Bad {
  std::string code, message;
};

/// Each of `bad` is rejected with its message.
inline void expectRejected(const std::vector<Bad> &bad) {
  for (const Bad &b : bad)
    EXPECT_EQ(errorOf(b.code), b.message) << b.code;
}

/// `got` equals `want` within `rel` of want's largest magnitude.
inline void expectClose(const at::Tensor &got, const at::Tensor &want,
                        const std::string &what, double rel = 1e-6) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  at::Tensor g = got.detach().to(at::kDouble),
             w = want.detach().to(at::kDouble);
  double scale = w.abs().max().item<double>();
  double diff = (g - w).abs().max().item<double>();
  EXPECT_LE(diff, rel * scale)
      << what << ": max |diff| " << diff << ", max |want| " << scale;
}

inline void expectNear(double got, double want, const std::string &what,
                       double rel = 1e-6) {
  EXPECT_LE(std::abs(got - want), rel * std::abs(want))
      << what << ": got " << got << ", want " << want;
}

inline at::Tensor f(std::initializer_list<float> v,
                    std::vector<int64_t> shape) {
  return at::tensor(std::vector<float>(v)).view(shape);
}

/// Runs a host program on `inputs` (masks of token inputs in `masks`).
inline std::vector<at::Tensor> run(const std::string &code,
                                   std::vector<at::Tensor> inputs,
                                   std::vector<at::Tensor> masks = {},
                                   int64_t pad = 0) {
  FnProgram p = FnProgram::parse(code);
  return p.evaluate(FnInputs{std::move(inputs), std::move(masks), pad});
}

/// The one output of a host program.
inline at::Tensor run1(const std::string &code, std::vector<at::Tensor> inputs,
                       std::vector<at::Tensor> masks = {}, int64_t pad = 0) {
  return run(code, std::move(inputs), std::move(masks), pad).at(0);
}

} // namespace rlhf::fntest

#endif // RLHF_TEST_UNIT_FNTESTUTIL_H
