//===- FnTestUtil.h - helpers of the fn code tests --------------*- C++ -*-===//
//
// Shared by FnProgramTest.cpp (verifier, ops), FnBuiltinsTest.cpp (the
// stdlib's re-expressions of the built-ins against the C++) and
// DatasetRowsTest.cpp (a program's dataset batches).
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

/// Sets environment variables for the life of the object.
class ScopedEnv {
public:
  void set(const char *name, const char *value) {
    const char *old = std::getenv(name);
    saved.emplace_back(name,
                       old ? std::optional<std::string>(old) : std::nullopt);
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second)
        setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        unsetenv(it->first.c_str());
    }
  }

private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
};

/// A one-rank program on the CPU, as a compiled executable creates it, in
/// a fresh folder (for its data files and --out) removed at the end. Add
/// models and datasets to `p`, then rlhf_prog_start.
struct OneRankJob {
  std::filesystem::path dir;
  ScopedEnv env;
  rlhf_prog *p = nullptr;

  OneRankJob(const std::string &name, int64_t steps, int64_t seed) {
    dir = std::filesystem::temp_directory_path() /
          ("rlhf-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    env.set("WORLD_SIZE", nullptr);
    env.set("RANK", nullptr);
    env.set("RLHF_DEVICE", nullptr);
    env.set("RLHF_PRECISION", nullptr);
    env.set("MASTER_ADDR", "127.0.0.1");
    env.set("MASTER_PORT", "0");
    env.set("RLHF_RENDEZVOUS_FILE", (dir / "port").c_str());
    std::vector<std::string> args = {name, "--out", (dir / "run").string(),
                                     "--quiet"};
    std::vector<char *> argv;
    for (std::string &a : args)
      argv.push_back(a.data());
    optind = 1;
    p = rlhf_prog_create(int(argv.size()), argv.data(), name.c_str(), steps,
                         seed, 0, 1, 0.0);
  }
  ~OneRankJob() { std::filesystem::remove_all(dir); }
};

} // namespace rlhf::fntest

#endif // RLHF_TEST_UNIT_FNTESTUTIL_H
