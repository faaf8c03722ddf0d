//===- FnProgramTest.cpp - fn code: verifier, ops, built-in equivalence ---===//
//
// The fn code ABI (rlhf/runtime/FnProgram.h): programs the verifier rejects
// and why, every op on small tensors computed by hand, and the built-in
// advantage estimators and losses re-expressed as fn code, which must give
// the built-ins' values, and the same gradients and updates of a tiny model.
//
//===----------------------------------------------------------------------===//

#include "../../runtime/lib/ProgramState.h" // rlhf_prog, rlhf_value

#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/FnProgram.h"
#include "rlhf/runtime/HostCompute.h"
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
#include <unistd.h>

using namespace rlhf;

namespace {

/// The header `rlhf.fn 1 f MODE`, then `lines`: line k of the program is
/// lines[k - 2].
std::string program(const char *mode,
                    std::initializer_list<const char *> lines) {
  std::string s = std::string("rlhf.fn 1 f ") + mode;
  for (const char *l : lines)
    s += std::string("\n") + l;
  return s;
}

/// The verifier's message for `code`, or "" when it is accepted.
std::string errorOf(const std::string &code) {
  try {
    FnProgram::parse(code);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

/// `code` with each `{KEY}` replaced by its number, printed exactly.
std::string subst(std::string code,
                  const std::map<std::string, double> &values) {
  for (auto &[k, v] : values) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    std::string key = "{" + k + "}";
    for (size_t at; (at = code.find(key)) != std::string::npos;)
      code.replace(at, key.size(), buf);
  }
  return code;
}

/// `got` equals `want` within `rel` of want's largest magnitude.
void expectClose(const at::Tensor &got, const at::Tensor &want,
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

void expectNear(double got, double want, const std::string &what,
                double rel = 1e-6) {
  EXPECT_LE(std::abs(got - want), rel * std::abs(want))
      << what << ": got " << got << ", want " << want;
}

at::Tensor f(std::initializer_list<float> v, std::vector<int64_t> shape) {
  return at::tensor(std::vector<float>(v)).view(shape);
}

/// Runs a host program on `inputs` (masks of token inputs in `masks`).
std::vector<at::Tensor> run(const std::string &code,
                            std::vector<at::Tensor> inputs,
                            std::vector<at::Tensor> masks = {},
                            int64_t pad = 0) {
  FnProgram p = FnProgram::parse(code);
  return p.evaluate(FnInputs{std::move(inputs), std::move(masks), pad});
}

/// The one output of a host program.
at::Tensor run1(const std::string &code, std::vector<at::Tensor> inputs,
                std::vector<at::Tensor> masks = {}, int64_t pad = 0) {
  return run(code, std::move(inputs), std::move(masks), pad).at(0);
}

//===----------------------------------------------------------------------===//
// The verifier
//===----------------------------------------------------------------------===//

TEST(FnVerifier, AcceptsAWellFormedLoss) {
  FnProgram p = FnProgram::parse(program(
      "loss", {"%0 = input 0 tok", "%1 = input 1 f1", "%2 = logprobs %0",
               "%3 = mask_of %0", "%4 = token_mean %2 %3", "%5 = batch_sum %1",
               "%6 = const 0.5", "%7 = mul %6 %4", "%8 = sub %7 %4",
               "%9 = div %8 %6", "%10 = neg %9", "out loss %10\n"}));
  EXPECT_EQ(p.name(), "f");
  EXPECT_EQ(p.mode(), FnProgram::Mode::Loss);
  EXPECT_EQ(p.numInputs(), 2);
  EXPECT_EQ(p.inputKind(0), FnKind::Tokens);
  EXPECT_EQ(p.inputKind(1), FnKind::PerSeq);
  EXPECT_EQ(p.modelInputs(), std::vector<int64_t>{0});
  EXPECT_FALSE(p.readsModel(1));
  EXPECT_EQ(p.outputKind(0), FnKind::Scalar);
  // Per-row statistics need no more than a row: a loss may use them.
  EXPECT_EQ(errorOf(program("loss", {"%0 = input 0 tok", "%1 = logprobs %0",
                                     "%2 = mask_of %0", "%3 = seq_std %1 %2 1",
                                     "%4 = batch_mean %3", "out loss %4"})),
            "");
}

struct Bad {
  std::string code, message;
};

TEST(FnVerifier, RejectsBadPrograms) {
  const Bad bad[] = {
      {"rlhf.fun 1 f host\n%0 = input 0 f1\nout x %0",
       "fn code: line 1: expected the header 'rlhf.fn 1 NAME MODE', got "
       "'rlhf.fun 1 f host'"},
      {"rlhf.fn 2 f host\n%0 = input 0 f1\nout x %0",
       "fn 'f': line 1: fn code version 2 is not supported; this runtime "
       "reads version 1"},
      {"rlhf.fn 1 f train\n%0 = input 0 f1\nout x %0",
       "fn 'f': line 1: mode must be 'host' or 'loss', got 'train'"},
      {program("host", {"%0 = input 0 f1", "%1 = frobnicate %0", "out x %1"}),
       "fn 'f': line 3: unknown op 'frobnicate'"},
      {program("host", {"%0 = input 0 f1", "%1 = neg %2", "out x %1"}),
       "fn 'f': line 3: %2 is used before it is defined (in %1)"},
      {program("host", {"%0 = input 0 f1", "%1 = neg %1", "out x %1"}),
       "fn 'f': line 3: %1 refers to itself"},
      {program("host", {"%0 = input 0 f1", "%1 = input 1 f2", "%2 = add %0 %1",
                        "out x %2"}),
       "fn 'f': line 4: 'add' mixes %0 (rank 1) and %1 (rank 2); broadcast "
       "the rank-1 value first"},
      {program("host", {"%0 = input 0 tok", "%1 = const 2", "%2 = mul %0 %1",
                        "out x %2"}),
       "fn 'f': line 4: 'mul' cannot compute on token ids %0 (tok)"},
      {program("host", {"%0 = input 0 f1", "%1 = seq_sum %0 %0", "out x %1"}),
       "fn 'f': line 3: 'seq_sum' needs rank 2 for operand 1, %0 (rank 1) is "
       "not"},
      {program("host", {"%0 = input 0 f1", "%1 = add %0", "out x %1"}),
       "fn 'f': line 3: 'add' takes 2 operands (add %a %b), got 1"},
      {program("host", {"%0 = input 0 f1", "%1 = const 1.5x", "out x %1"}),
       "fn 'f': line 3: operand 1 of 'const' must be a number, got '1.5x'"},
      {program("host",
               {"%0 = input 0 f1", "%1 = group_mean %0 two", "out x %1"}),
       "fn 'f': line 3: operand 2 of 'group_mean' must be an integer, got "
       "'two'"},
      {program("host", {"%0 = input 0 f1", "%1 = add %0 1", "out x %1"}),
       "fn 'f': line 3: operand 2 of 'add' must be a value %i, got '1'"},
      {program("host",
               {"%0 = input 0 f1", "%1 = group_std %0 2 2", "out x %1"}),
       "fn 'f': line 3: 'group_std' divides by G - C = 0, which must be at "
       "least 1"},
      {program("host", {"%0 = input 0 f1", "%1 = group_sum %0 0", "out x %1"}),
       "fn 'f': line 3: the group size must be at least 1, got 0"},
      {program("host", {"%0 = input 0 f1", "%2 = neg %0", "out x %2"}),
       "fn 'f': line 3: values must be numbered in order from %0: expected "
       "%1, got '%2'"},
      {program("host", {"%0 = input 0 f1", "%1 = input 2 f1", "%2 = add %0 %1",
                        "out x %2"}),
       "fn 'f': line 3: input 1 is never declared; declare every input 0..2, "
       "unused ones too"},
      {program("host", {"%0 = input 0 f1", "%1 = input 0 f1", "out x %1"}),
       "fn 'f': line 3: input 0 is declared twice, first at line 2; declare "
       "each input once"},
      {program("host", {"%0 = input 0 f3", "out x %0"}),
       "fn 'f': line 2: input kind must be f1, f2 or tok, got 'f3'"},
      {program("host", {"%0 = input -1 f1", "out x %0"}),
       "fn 'f': line 2: the input index must be at least 0, got -1"},
      {program("host", {"%0 = input 0 f1", "", "out x %0"}),
       "fn 'f': line 3: blank line"},
      {program("host", {"%0 = input 0 f1", "%1 = neg  %0", "out x %1"}),
       "fn 'f': line 3: tokens must be separated by single spaces"},
      {program("host", {"%0 = input 0 f1", "%1 = neg %0"}),
       "fn 'f': line 3: no outputs; end with 'out NAME %i' lines"},
      {program("host", {"%0 = input 0 f1", "out x %0", "%1 = neg %0"}),
       "fn 'f': line 4: %1 follows an 'out' line; outputs come last"},
      {program("host", {"%0 = input 0 f1", "out x %1"}),
       "fn 'f': line 3: output 'x' must name a defined value %i, got '%1'"},
      {program("host", {"%0 = input 0 f1", "out x %0", "out x %0"}),
       "fn 'f': line 4: output 'x' is named twice"},
      {program("host", {"%0 = input 0 tok", "out x %0"}),
       "fn 'f': line 3: output 'x' is token ids; outputs are float values"},
      {program("host", {"%0 = input 0 tok", "%1 = logprobs %0", "out x %1"}),
       "fn 'f': line 3: 'logprobs' reads the model, which only a loss may do"},
      {program("host", {"%0 = input 0 f2", "%1 = const 1",
                        "%2 = rcumsum %0 %0 %0", "out x %2"}),
       "fn 'f': line 4: 'rcumsum' needs rank 0 for operand 2, %0 (rank 2) is "
       "not"},
      {program("host", {"%0 = input 0 f2", "%1 = neg %0", "%2 = mask_of %1",
                        "out x %2"}),
       "fn 'f': line 4: 'mask_of' reads the mask an input carries; %1 (rank "
       "2) is computed, not an input"},
      {program("host", {"%0 = input 0 f1", "%1 = mask_of %0", "out x %1"}),
       "fn 'f': line 3: 'mask_of' needs tok or a rank-2 input for operand 1, "
       "%0 (rank 1) is not"},
      {program("host", {"%0 = input 0 f2", "%1 = input 1 f1",
                        "%2 = clamp %0 %1 %1", "out x %2"}),
       "fn 'f': line 4: 'clamp' bound %1 (rank 1) must be rank 0 or the rank "
       "of %0 (rank 2)"},
      // Losses.
      {program("loss",
               {"%0 = input 0 tok", "%1 = input 1 f2", "%2 = mask_of %0",
                "%3 = token_mean %1 %2", "out loss %3"}),
       "fn 'f': line 6: the loss 'loss' (%3) does not depend on the model"},
      {program("loss", {"%0 = input 0 tok", "%1 = score %0",
                        "%2 = batch_std %1 1", "out loss %2"}),
       "fn 'f': line 4: 'batch_std' is not allowed in a loss: it needs the "
       "whole batch, which micro-batches split"},
      {program("loss",
               {"%0 = input 0 tok", "%1 = score %0", "%2 = group_mean %1 4",
                "%3 = batch_mean %2", "out loss %3"}),
       "fn 'f': line 4: 'group_mean' is not allowed in a loss: it needs the "
       "whole batch, which micro-batches split"},
      {program("loss", {"%0 = input 0 tok", "%1 = logprobs %0", "%2 = exp %1",
                        "%3 = token_mean %1 %2", "out loss %3"}),
       "fn 'f': line 5: the mask of 'token_mean' (%2) depends on the model; a "
       "loss's token masks must come from its inputs"},
      {program("loss", {"%0 = input 0 tok", "%1 = logprobs %0",
                        "%2 = mask_of %0", "%3 = token_mean %1 %2",
                        "out a %3", "out b %1"}),
       "fn 'f': line 7: the metric 'b' must be rank 0, %1 (rank 2) is not"},
      {program("loss", {"%0 = input 0 tok", "%1 = score %0", "out loss %1"}),
       "fn 'f': line 4: the loss 'loss' must be rank 0, %1 (rank 1) is not"},
      {program("loss", {"%0 = input 0 tok", "%1 = score %0",
                        "%2 = batch_mean %1", "%3 = mul %2 %2", "out loss %3"}),
       "fn 'f': line 5: 'mul' uses a batch reduction in a loss other than in "
       "a sum scaled by constants; micro-batches add up their parts of a "
       "loss, so it must be linear in its batch reductions"},
      {program("loss",
               {"%0 = input 0 tok", "%1 = score %0", "%2 = batch_mean %1",
                "%3 = const 1", "%4 = add %2 %3", "out loss %4"}),
       "fn 'f': line 6: 'add' uses a batch reduction in a loss other than in "
       "a sum scaled by constants; micro-batches add up their parts of a "
       "loss, so it must be linear in its batch reductions"},
      {program("loss", {"%0 = input 0 tok", "%1 = score %0",
                        "%2 = batch_mean %1", "%3 = log %2", "out loss %3"}),
       "fn 'f': line 5: 'log' uses a batch reduction in a loss other than in "
       "a sum scaled by constants; micro-batches add up their parts of a "
       "loss, so it must be linear in its batch reductions"},
      {program("loss", {"%0 = input 0 tok", "%1 = score %0", "%2 = const 1",
                        "%3 = mul %2 %2", "out loss %3"}),
       "fn 'f': line 6: the loss 'loss' (%3) is no batch reduction: reduce it "
       "with token_mean, token_sum, batch_mean or batch_sum"},
  };
  for (const Bad &b : bad)
    EXPECT_EQ(errorOf(b.code), b.message) << b.code;
}

// Nothing a program can say crashes the parser: every prefix and every
// line dropped gives a program or an rlhf::Error.
TEST(FnVerifier, MangledProgramsFailCleanly) {
  std::string good = program(
      "loss", {"%0 = input 0 tok", "%1 = input 1 f1", "%2 = logprobs %0",
               "%3 = mask_of %0", "%4 = token_mean %2 %3", "%5 = batch_sum %1",
               "%6 = add %4 %5", "out loss %6"});
  ASSERT_EQ(errorOf(good), "");
  for (size_t n = 0; n < good.size(); ++n) {
    std::string msg = errorOf(good.substr(0, n));
    if (!msg.empty()) {
      EXPECT_EQ(msg.rfind("fn ", 0), 0u) << msg;
    }
  }
  EXPECT_NE(errorOf(""), "");
}

//===----------------------------------------------------------------------===//
// Op semantics
//===----------------------------------------------------------------------===//

TEST(FnOps, Elementwise) {
  at::Tensor a = f({1, -2, 3}, {3}), b = f({2, 2, -1}, {3});
  auto out = run(program("host", {"%0 = input 0 f1",
                                  "%1 = input 1 f1",
                                  "%2 = add %0 %1",
                                  "%3 = sub %0 %1",
                                  "%4 = mul %0 %1",
                                  "%5 = div %0 %1",
                                  "%6 = min %0 %1",
                                  "%7 = max %0 %1",
                                  "%8 = lt %0 %1",
                                  "%9 = ge %0 %1",
                                  "%10 = eq %0 %1",
                                  "%11 = ne %0 %1",
                                  "%12 = neg %0",
                                  "%13 = abs %0",
                                  "%14 = const 2.5",
                                  "%15 = mul %0 %14",
                                  "%16 = where %8 %0 %14",
                                  "%17 = le %0 %1",
                                  "%18 = gt %0 %1",
                                  "out add %2",
                                  "out sub %3",
                                  "out mul %4",
                                  "out div %5",
                                  "out min %6",
                                  "out max %7",
                                  "out lt %8",
                                  "out ge %9",
                                  "out eq %10",
                                  "out ne %11",
                                  "out neg %12",
                                  "out abs %13",
                                  "out scaled %15",
                                  "out where %16",
                                  "out le %17",
                                  "out gt %18"}),
                 {a, b});
  const std::vector<std::vector<float>> want = {
      {3, 0, 2},      {-1, -4, 4},  {2, -4, -3}, {0.5, -1, -3},
      {1, -2, -1},    {2, 2, 3},    {1, 1, 0},   {0, 0, 1},
      {0, 0, 0},      {1, 1, 1},    {-1, 2, -3}, {1, 2, 3},
      {2.5, -5, 7.5}, {1, -2, 2.5}, {1, 1, 0},   {0, 0, 1}};
  ASSERT_EQ(out.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(out[i].scalar_type(), at::kFloat) << i;
    EXPECT_TRUE(at::allclose(out[i], at::tensor(want[i])))
        << i << ": " << out[i];
  }
  at::Tensor x = f({0, 1, -1}, {3});
  auto u =
      run(program("host", {"%0 = input 0 f1", "%1 = exp %0", "%2 = log %1",
                           "%3 = sigmoid %0", "%4 = softplus %0", "%5 = abs %0",
                           "%6 = sqrt %5", "out exp %1", "out log %2",
                           "out sigmoid %3", "out softplus %4", "out sqrt %6"}),
          {x});
  EXPECT_TRUE(at::allclose(u[0], x.exp()));
  EXPECT_TRUE(at::allclose(u[1], x));
  EXPECT_TRUE(at::allclose(u[2], at::sigmoid(x)));
  EXPECT_TRUE(at::allclose(u[3], at::log1p(x.exp())));
  EXPECT_TRUE(at::allclose(u[4], f({0, 1, 1}, {3})));
}

TEST(FnOps, ClampBroadcastAndBoolInputs) {
  at::Tensor x = f({-2, 0.5, 3, 1}, {2, 2});
  at::Tensor lo = f({-1, 1, 0, 0}, {2, 2});
  at::Tensor c =
      run1(program("host", {"%0 = input 0 f2", "%1 = input 1 f2",
                            "%2 = const 2", "%3 = clamp %0 %1 %2", "out c %3"}),
           {x, lo});
  EXPECT_TRUE(at::equal(c, f({-1, 1, 2, 1}, {2, 2}))) << c;
  at::Tensor s = f({10, 20}, {2});
  at::Tensor b = run1(
      program("host", {"%0 = input 0 f1", "%1 = input 1 f2",
                       "%2 = broadcast %0 %1", "%3 = add %2 %1", "out b %3"}),
      {s, x});
  EXPECT_TRUE(at::equal(b, f({8, 10.5, 23, 21}, {2, 2}))) << b;
  // A bool input is 0/1 floats.
  at::Tensor m = at::tensor({1, 0, 1, 1}).to(at::kBool).view({2, 2});
  at::Tensor t = run1(program("host", {"%0 = input 0 f2", "%1 = input 1 f2",
                                       "%2 = seq_sum %0 %1", "out t %2"}),
                      {x, m});
  EXPECT_TRUE(at::equal(t, f({-2, 4}, {2}))) << t;
}

TEST(FnOps, SeqReductions) {
  at::Tensor x = f({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  at::Tensor m = f({1, 1, 1, 0, 0, 0, 0, 0}, {2, 4});
  auto out = run(program("host", {"%0 = input 0 f2", "%1 = input 1 f2",
                                  "%2 = seq_sum %0 %1", "%3 = seq_mean %0 %1",
                                  "%4 = seq_var %0 %1 1",
                                  "%5 = seq_std %0 %1 0", "out sum %2",
                                  "out mean %3", "out var %4", "out std %5"}),
                 {x, m});
  // Row 1 has no masked token: its mean divides by max(0, 1), its var by
  // max(0 - C, 1).
  EXPECT_TRUE(at::allclose(out[0], f({6, 0}, {2})));
  EXPECT_TRUE(at::allclose(out[1], f({2, 0}, {2})));
  EXPECT_TRUE(at::allclose(out[2], f({1, 0}, {2})));
  EXPECT_TRUE(at::allclose(out[3], f({float(std::sqrt(2.0 / 3)), 0}, {2})));
}

TEST(FnOps, GroupReductions) {
  at::Tensor x = f({1, 2, 3, 4, 5, 9}, {6});
  auto out =
      run(program("host", {"%0 = input 0 f1", "%1 = group_sum %0 3",
                           "%2 = group_mean %0 3", "%3 = group_var %0 3 1",
                           "%4 = group_std %0 3 0", "%5 = group_std %0 1 0",
                           "out sum %1", "out mean %2", "out var %3",
                           "out std %4", "out one %5"}),
          {x});
  EXPECT_TRUE(at::allclose(out[0], f({6, 6, 6, 18, 18, 18}, {6})));
  EXPECT_TRUE(at::allclose(out[1], f({2, 2, 2, 6, 6, 6}, {6})));
  EXPECT_TRUE(at::allclose(out[2], f({1, 1, 1, 7, 7, 7}, {6})));
  float a = float(std::sqrt(2.0 / 3)), b = float(std::sqrt(14.0 / 3));
  EXPECT_TRUE(at::allclose(out[3], f({a, a, a, b, b, b}, {6})));
  EXPECT_TRUE(at::equal(out[4], at::zeros({6})));
  try {
    run(program("host", {"%0 = input 0 f1", "%1 = group_sum %0 4", "out s %1"}),
        {x});
    ADD_FAILURE() << "6 rows split into groups of 4";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(),
                 "fn 'f': line 3: 6 rows do not split into groups of 4");
  }
}

TEST(FnOps, BatchAndTokenReductions) {
  at::Tensor x = f({1, 2, 3, 6}, {4});
  auto out = run(program("host", {"%0 = input 0 f1", "%1 = batch_sum %0",
                                  "%2 = batch_mean %0", "%3 = batch_var %0 1",
                                  "%4 = batch_std %0 0", "%5 = batch_var %0 9",
                                  "out sum %1", "out mean %2", "out var %3",
                                  "out std %4", "out big %5"}),
                 {x});
  for (const at::Tensor &t : out)
    EXPECT_EQ(t.dim(), 0);
  EXPECT_FLOAT_EQ(out[0].item<float>(), 12);
  EXPECT_FLOAT_EQ(out[1].item<float>(), 3);
  EXPECT_FLOAT_EQ(out[2].item<float>(), 14.0f / 3);
  EXPECT_FLOAT_EQ(out[3].item<float>(), std::sqrt(14.0f / 4));
  EXPECT_FLOAT_EQ(out[4].item<float>(), 14.0f); // max(4 - 9, 1)
  at::Tensor v = f({1, 2, 3, 4}, {2, 2}), m = f({1, 0, 1, 1}, {2, 2});
  auto tok =
      run(program("host",
                  {"%0 = input 0 f2", "%1 = input 1 f2", "%2 = token_sum %0 %1",
                   "%3 = token_mean %0 %1", "%4 = token_var %0 %1 0",
                   "%5 = token_std %0 %1 1", "out sum %2", "out mean %3",
                   "out var %4", "out std %5"}),
          {v, m});
  EXPECT_FLOAT_EQ(tok[0].item<float>(), 8);
  EXPECT_FLOAT_EQ(tok[1].item<float>(), 8.0f / 3);
  EXPECT_FLOAT_EQ(tok[2].item<float>(), 14.0f / 9);
  EXPECT_FLOAT_EQ(tok[3].item<float>(), std::sqrt(7.0f / 3));
}

TEST(FnOps, LastNextAndRcumsum) {
  at::Tensor m = f({1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}, {3, 4});
  at::Tensor x = f({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  auto out =
      run(program("host", {"%0 = input 0 f2", "%1 = input 1 f2", "%2 = last %1",
                           "%3 = next %0", "out last %2", "out next %3"}),
          {x, m});
  EXPECT_TRUE(
      at::equal(out[0], f({0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {3, 4})))
      << out[0];
  EXPECT_TRUE(
      at::equal(out[1], f({2, 3, 4, 0, 6, 7, 8, 0, 10, 11, 12, 0}, {3, 4})))
      << out[1];
  // Masked-out positions neither count nor break the discounting:
  // t=3: 4; t=2 (masked): 0, running stays 4; t=1: 2 + 0.5*4; t=0: 1 + 0.5*4.
  at::Tensor r = run1(
      program("host", {"%0 = input 0 f2", "%1 = input 1 f2", "%2 = const 0.5",
                       "%3 = rcumsum %0 %2 %1", "out r %3"}),
      {f({1, 2, 3, 4}, {1, 4}), f({1, 1, 0, 1}, {1, 4})});
  EXPECT_TRUE(at::equal(r, f({3, 4, 0, 4}, {1, 4}))) << r;
}

TEST(FnOps, MaskOfTakesTheGivenMaskElseNonPadTokens) {
  at::Tensor seq = at::tensor({5, 0, 7, 0, 3, 4, 2, 2}, at::kLong).view({2, 4});
  std::string code =
      program("host", {"%0 = input 0 tok", "%1 = mask_of %0", "out m %1"});
  // No mask: the predicted tokens (1..S-1) that are not the pad.
  EXPECT_TRUE(
      at::equal(run1(code, {seq}, {}, 0), f({0, 1, 0, 1, 1, 1}, {2, 3})));
  EXPECT_TRUE(
      at::equal(run1(code, {seq}, {}, 2), f({1, 1, 1, 1, 0, 0}, {2, 3})));
  at::Tensor gen = at::tensor({0, 0, 1, 0, 1, 1}, at::kLong).view({2, 3});
  EXPECT_TRUE(at::equal(run1(code, {seq}, {gen}, 0), gen.to(at::kFloat)));
  // int32 token ids are ids too.
  EXPECT_TRUE(at::equal(run1(code, {seq.to(at::kInt)}, {at::Tensor()}, 0),
                        f({0, 1, 0, 1, 1, 1}, {2, 3})));
  // Of per-token values: the mask they carry.
  std::string values =
      program("host", {"%0 = input 0 f2", "%1 = mask_of %0", "out m %1"});
  at::Tensor lp = at::randn({2, 3});
  EXPECT_TRUE(at::equal(run1(values, {lp}, {gen}), gen.to(at::kFloat)));
  try {
    run1(values, {lp});
    ADD_FAILURE() << "mask_of values without a mask";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "fn 'f': line 3: input 0 (rank 2) carries no mask "
                           "for 'mask_of' to read");
  }
  try {
    run1(code, {seq}, {at::ones({2, 4})}, 0);
    ADD_FAILURE() << "a mask of the wrong shape";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "fn 'f': line 3: the mask of input 0 is [2, 4], "
                           "its tokens [2, 4] need [N, S-1]");
  }
}

TEST(FnOps, InputsAreChecked) {
  std::string code =
      program("host", {"%0 = input 0 f1", "%1 = input 1 f2", "%2 = input 2 tok",
                       "%3 = seq_sum %1 %1", "%4 = add %0 %3", "out x %4"});
  at::Tensor s = at::zeros({2}), t = at::zeros({2, 3}),
             ids = at::zeros({2, 4}, at::kLong);
  auto msg = [&](std::vector<at::Tensor> in) -> std::string {
    try {
      run(code, std::move(in));
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(msg({s, t, ids}), "");
  EXPECT_EQ(msg({s, t}), "fn 'f' takes 3 inputs, got 2");
  EXPECT_EQ(msg({t, t, ids}),
            "fn 'f': line 2: input 0 (rank 1) must be [N], got [2, 3]");
  EXPECT_EQ(msg({s, t, at::zeros({2, 4})}),
            "fn 'f': line 4: input 2 (tok) must hold token ids, got Float");
  EXPECT_EQ(msg({s, t.to(at::kLong), ids}),
            "fn 'f': line 3: input 1 (rank 2) must hold floats, got Long");
  EXPECT_EQ(msg({s, at::zeros({3, 3}), ids}),
            "fn 'f': line 3: input 1 (rank 2) has 3 rows, input 0 has 2");
  EXPECT_EQ(msg({s, t, at::zeros({2, 5}, at::kLong)}),
            "fn 'f': line 4: input 2 (tok) has 4 predicted tokens per row (T = "
            "S-1 for tok), an earlier input has 3");
  EXPECT_EQ(msg({s, t, at::Tensor()}),
            "fn 'f': line 4: input 2 (tok) is missing");
  // A double input computes in fp32.
  EXPECT_EQ(run1(code, {s.to(at::kDouble), t, ids}).scalar_type(), at::kFloat);
}

//===----------------------------------------------------------------------===//
// Losses on a stand-in model
//===----------------------------------------------------------------------===//

TEST(FnLoss, DenominatorsAndModelOutputs) {
  FnProgram p = FnProgram::parse(program(
      "loss",
      {"%0 = input 0 tok", "%1 = input 1 f1", "%2 = logprobs %0",
       "%3 = mask_of %0", "%4 = token_sum %2 %3", "%5 = token_mean %2 %3",
       "%6 = batch_mean %1", "%7 = batch_sum %1", "%8 = add %4 %5",
       "%9 = add %8 %6", "%10 = add %9 %7", "out loss %10"}));
  const int64_t N = 3, S = 5, V = 7;
  at::Tensor seq = at::randint(1, V, {N, S}, at::kLong);
  at::Tensor mask = f({1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0}, {N, S - 1});
  at::Tensor w = f({0.5, 1, 2}, {N});
  FnInputs in{{seq, w}, {mask}, 0};
  EXPECT_EQ(p.localDenominators(in), (std::vector<double>{0, 7, 3, 0}));
  at::Tensor logits = at::randn({N, S, V}).requires_grad_(true);
  int calls = 0;
  FnModel model = [&](int64_t input, const at::Tensor &tokens) {
    EXPECT_EQ(input, 0);
    EXPECT_TRUE(at::equal(tokens, seq));
    ++calls;
    return logits;
  };
  std::vector<double> d = {0, 10, 4, 0};
  at::Tensor loss = p.evaluate(in, &model, &d).at(0);
  EXPECT_EQ(calls, 1) << "the model runs once per token input";
  at::Tensor lp = tokenLogprobs(logits, seq);
  at::Tensor lpSum = (lp * mask).sum();
  at::Tensor want = lpSum + lpSum / 10 + w.sum() / 4 + w.sum();
  EXPECT_NEAR(loss.item<double>(), want.item<double>(), 1e-5);
  loss.backward();
  at::Tensor g = logits.grad().clone();
  logits.grad().zero_();
  want.backward();
  expectClose(g, logits.grad(), "d loss / d logits");
  // Without denominators, those of the inputs alone.
  at::Tensor local = p.evaluate(in, &model).at(0);
  EXPECT_NEAR(local.item<double>(),
              (lpSum + lpSum / 7 + w.sum() / 3 + w.sum()).item<double>(), 1e-5);
  try {
    p.evaluate(in);
    ADD_FAILURE() << "a loss without a model";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(),
                 "fn 'f': line 4: 'logprobs' needs the trained model");
  }
  std::vector<double> two = {1, 2};
  EXPECT_THROW(p.evaluate(in, &model, &two), Error);
}

TEST(FnLoss, ValuesScoreAndEntropy) {
  FnProgram p = FnProgram::parse(
      program("loss", {"%0 = input 0 tok", "%1 = values %0", "%2 = score %0",
                       "%3 = mask_of %0", "%4 = token_sum %1 %3",
                       "%5 = batch_sum %2", "%6 = add %4 %5", "out loss %6"}));
  const int64_t N = 2, S = 4;
  at::Tensor seq = at::ones({N, S}, at::kLong);
  at::Tensor mask = f({1, 1, 0, 0, 1, 0}, {N, S - 1});
  at::Tensor values = f({1, 2, 3, 4, 5, 6, 7, 8}, {N, S}).requires_grad_(true);
  FnModel model = [&](int64_t, const at::Tensor &) { return values; };
  at::Tensor loss = p.evaluate({{seq}, {mask}, 0}, &model).at(0);
  // values: positions 0..S-2 under the mask (1 + 2, 6); score: the value of
  // the last masked token t, at position t+1 (3, 7).
  EXPECT_FLOAT_EQ(loss.item<float>(), 1 + 2 + 6 + 3 + 7);
  // A value head where logits are needed is an error.
  FnProgram lp = FnProgram::parse(
      program("loss", {"%0 = input 0 tok", "%1 = entropy %0", "%2 = mask_of %0",
                       "%3 = token_mean %1 %2", "out loss %3"}));
  try {
    lp.evaluate({{seq}, {mask}, 0}, &model);
    ADD_FAILURE() << "values where logits are needed";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "fn 'f': line 3: 'entropy' needs logits [N, S, V] "
                           "of an lm head, the model gives [2, 4] for tokens "
                           "[2, 4]");
  }
  at::Tensor logits = at::randn({N, S, 5});
  FnModel lm = [&](int64_t, const at::Tensor &) { return logits; };
  at::Tensor h = lp.evaluate({{seq}, {mask}, 0}, &lm).at(0);
  at::Tensor l = at::log_softmax(logits.narrow(1, 0, S - 1), -1);
  at::Tensor ent = -(l.exp() * l).sum(-1);
  EXPECT_NEAR(h.item<double>(), ((ent * mask).sum() / 3).item<double>(), 1e-6);
}

//===----------------------------------------------------------------------===//
// The built-in host functions, re-expressed
//===----------------------------------------------------------------------===//

// rlhf::gae, as stdlib/algorithms/estimators.rlhf writes it: the mask is
// the one the logprobs carry. gamma*lam is one constant, folded as the
// built-in multiplies the doubles before rounding to fp32.
const char *kGae = R"(rlhf.fn 1 gae host
%0 = input 0 f1
%1 = input 1 f2
%2 = input 2 f2
%3 = input 3 f2
%4 = mask_of %2
%5 = sub %2 %3
%6 = const {NEGKL}
%7 = mul %6 %5
%8 = mul %7 %4
%9 = last %4
%10 = broadcast %0 %4
%11 = mul %10 %9
%12 = add %8 %11
%13 = mul %1 %4
%14 = next %13
%15 = const {GAMMA}
%16 = mul %15 %14
%17 = add %12 %16
%18 = sub %17 %13
%19 = const {GAMMALAM}
%20 = rcumsum %18 %19 %4
%21 = add %20 %13
%22 = mul %21 %4
%23 = token_mean %20 %4
%24 = token_var %20 %4 0
%25 = const 1e-8
%26 = add %24 %25
%27 = sqrt %26
%28 = sub %20 %23
%29 = div %28 %27
%30 = mul %29 %4
out advantages %30
out returns %22)";

/// A generation mask [N, T]: each row's tokens from a random start for a
/// random length; row 1 has none.
at::Tensor generationMask(int64_t N, int64_t T, at::Generator &gen) {
  at::Tensor m = at::zeros({N, T});
  for (int64_t i = 0; i < N; ++i) {
    if (i == 1)
      continue;
    int64_t start = at::randint(0, T / 2, {1}, gen, at::kLong).item<int64_t>();
    int64_t len =
        at::randint(1, T - start + 1, {1}, gen, at::kLong).item<int64_t>();
    m[i].narrow(0, start, len).fill_(1);
  }
  return m;
}

TEST(FnBuiltins, GaeMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  const int64_t N = 6, T = 8;
  for (auto [gamma, lam, kl] :
       {std::tuple{1.0, 0.95, 0.0}, std::tuple{0.99, 0.9, 0.1},
        std::tuple{0.9, 0.5, 0.05}}) {
    at::Tensor score = at::randn({N}, gen), values = at::randn({N, T}, gen),
               lp = at::randn({N, T}, gen), ref = at::randn({N, T}, gen);
    at::Tensor mask = generationMask(N, T, gen);
    GaeResult want = gae(score, values, lp, ref, mask, gamma, lam, kl);
    auto got = run(
        subst(kGae,
              {{"NEGKL", -kl}, {"GAMMA", gamma}, {"GAMMALAM", gamma * lam}}),
        {score, values, lp, ref}, {{}, {}, mask});
    std::string what = "gamma " + std::to_string(gamma) + " lam " +
                       std::to_string(lam) + " kl " + std::to_string(kl);
    expectClose(got[0], want.advantages, "advantages, " + what);
    expectClose(got[1], want.returns, "returns, " + what);
  }
}

TEST(FnBuiltins, GroupEstimatorsMatch) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(12);
  at::Tensor score = at::randn({12}, gen), base = at::randn({12}, gen);
  for (int64_t G : {1, 2, 3, 4}) {
    // group_std needs G - C >= 1: one sample per group has std 0 either way.
    std::string grpo = subst(R"(rlhf.fn 1 grpo_adv host
%0 = input 0 f1
%1 = group_mean %0 {G}
%2 = sub %0 %1
%3 = group_std %0 {G} {C}
%4 = const 1e-6
%5 = add %3 %4
%6 = div %2 %5
out advantages %6)",
                             {{"G", double(G)}, {"C", G > 1 ? 1.0 : 0.0}});
    expectClose(run1(grpo, {score}), grpoAdvantages(score, G),
                "grpo, group " + std::to_string(G));
    if (G < 2)
      continue;
    std::string rloo = subst(R"(rlhf.fn 1 rloo host
%0 = input 0 f1
%1 = group_sum %0 {G}
%2 = sub %1 %0
%3 = const {G1}
%4 = div %2 %3
%5 = sub %0 %4
out advantages %5)",
                             {{"G", double(G)}, {"G1", double(G - 1)}});
    expectClose(run1(rloo, {score}), rlooAdvantages(score, G),
                "rloo, group " + std::to_string(G));
  }
  expectClose(run1(program("host", {"%0 = input 0 f1", "%1 = input 1 f1",
                                    "%2 = sub %0 %1", "out advantages %2"}),
                   {score, base}),
              remaxAdvantages(score, base), "remax");
}

TEST(FnBuiltins, KlPenaltyMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(13);
  const int64_t N = 5, T = 7;
  at::Tensor score = at::randn({N}, gen), lp = at::randn({N, T}, gen),
             ref = at::randn({N, T}, gen), mask = generationMask(N, T, gen);
  for (double coef : {0.0, 0.1, 0.05}) {
    std::string code = subst(R"(rlhf.fn 1 kl_penalty host
%0 = input 0 f1
%1 = input 1 f2
%2 = input 2 f2
%3 = input 3 f2
%4 = sub %1 %2
%5 = seq_sum %4 %3
%6 = const {COEF}
%7 = mul %6 %5
%8 = sub %0 %7
out score %8)",
                             {{"COEF", coef}});
    expectClose(run1(code, {score, lp, ref, mask}),
                klPenalty(score, lp, ref, mask, coef),
                "kl penalty, coef " + std::to_string(coef));
  }
}

//===----------------------------------------------------------------------===//
// The built-in losses, re-expressed: one train step each way
//===----------------------------------------------------------------------===//

// PPO's clipped surrogate on per-token advantages.
const char *kPpoActor = R"(rlhf.fn 1 ppo_actor loss
%0 = input 0 tok
%1 = input 1 f2
%2 = input 2 f2
%3 = logprobs %0
%4 = sub %3 %1
%5 = exp %4
%6 = mul %5 %2
%7 = const {LO}
%8 = const {HI}
%9 = clamp %5 %7 %8
%10 = mul %9 %2
%11 = min %6 %10
%12 = neg %11
%13 = mask_of %0
%14 = token_mean %12 %13
out loss %14)";

// GRPO: the surrogate on per-sequence advantages plus the k3 KL estimator.
const char *kGrpo = R"(rlhf.fn 1 grpo loss
%0 = input 0 tok
%1 = input 1 f2
%2 = input 2 f1
%3 = input 3 f2
%4 = logprobs %0
%5 = sub %4 %1
%6 = exp %5
%7 = broadcast %2 %4
%8 = mul %6 %7
%9 = const {LO}
%10 = const {HI}
%11 = clamp %6 %9 %10
%12 = mul %11 %7
%13 = min %8 %12
%14 = neg %13
%15 = sub %3 %4
%16 = exp %15
%17 = sub %16 %15
%18 = const 1
%19 = sub %17 %18
%20 = const {KL}
%21 = mul %20 %19
%22 = add %14 %21
%23 = mask_of %0
%24 = token_mean %22 %23
out loss %24)";

// PPO's clipped value loss.
const char *kPpoValue = R"(rlhf.fn 1 ppo_value loss
%0 = input 0 tok
%1 = input 1 f2
%2 = input 2 f2
%3 = values %0
%4 = sub %3 %1
%5 = const {NEGCLIP}
%6 = const {CLIP}
%7 = clamp %4 %5 %6
%8 = add %1 %7
%9 = sub %3 %2
%10 = mul %9 %9
%11 = sub %8 %2
%12 = mul %11 %11
%13 = max %10 %12
%14 = const 0.5
%15 = mul %14 %13
%16 = mask_of %0
%17 = token_mean %15 %16
out loss %17)";

const char *kSft = R"(rlhf.fn 1 sft loss
%0 = input 0 tok
%1 = logprobs %0
%2 = neg %1
%3 = mask_of %0
%4 = token_mean %2 %3
out loss %4)";

// DPO: -log sigmoid(x) is softplus(-x), the same function; the two ATen
// kernels round differently by an ulp or so where x < 0.
const char *kDpo = R"(rlhf.fn 1 dpo loss
%0 = input 0 tok
%1 = input 1 tok
%2 = input 2 f2
%3 = input 3 f2
%4 = logprobs %0
%5 = mask_of %0
%6 = seq_sum %4 %5
%7 = logprobs %1
%8 = mask_of %1
%9 = seq_sum %7 %8
%10 = seq_sum %2 %5
%11 = seq_sum %3 %8
%12 = sub %6 %10
%13 = sub %9 %11
%14 = sub %12 %13
%15 = const {BETA}
%16 = mul %15 %14
%17 = neg %16
%18 = softplus %17
%19 = batch_mean %18
out loss %19)";

// The reward model's pairwise loss on the scores of the last trained
// tokens.
const char *kRm = R"(rlhf.fn 1 rm loss
%0 = input 0 tok
%1 = input 1 tok
%2 = score %0
%3 = score %1
%4 = sub %2 %3
%5 = neg %4
%6 = softplus %5
%7 = batch_mean %6
out loss %7)";

ModelConfig tiny(bool valueHead) {
  ModelConfig cfg;
  cfg.shape = ModelShape{2, 64, 4, 2, 176, 512, false, valueHead};
  cfg.maxSeq = 64;
  return cfg;
}

struct Trained {
  TrainStats stats;
  std::map<std::string, at::Tensor> params, grads;
};

/// One trainStep of a fresh tiny model: the parameters after it, and the
/// gradients of its last minibatch.
Trained trainOnce(bool valueHead, const TrainBatch &b, const TrainOptions &o) {
  ModelConfig cfg = tiny(valueHead);
  ParamMap p = initParams(cfg, 7);
  for (auto &[n, t] : p)
    t.requires_grad_(true);
  LlamaModel m(cfg, p, {});
  // Adam's first steps move each weight by about lr * g / (|g| + eps): with
  // the usual eps, a gradient near eps turns a rounding difference into a
  // large change of the update. A large eps keeps the update proportional
  // to the gradient, so that the second minibatch's gradients compare too.
  AdamSettings as;
  as.lr = 1e-3;
  as.eps = 1.0;
  Adam opt(as);
  Trained r;
  r.stats = trainStep(m, opt, b, o);
  for (auto &[n, t] : m.params()) {
    r.params[n] = t.detach().clone();
    r.grads[n] = t.grad().defined() ? t.grad().clone() : at::Tensor();
  }
  return r;
}

/// The built-in loss `builtin` and fn code `code` train alike: one step per
/// split of the batch (1 or 2 minibatches of 1 or 2 micro-batches), with
/// the loss, the gradient norm, every gradient and every updated parameter
/// within `rel` relative.
void expectSameTraining(LossKind builtin, const std::string &code,
                        bool valueHead, const TrainBatch &b,
                        const TrainBatch &fnBatch, LossSettings settings = {},
                        int64_t pad = 0, double rel = 1e-6) {
  FnProgram fn = FnProgram::parse(code);
  for (auto [minibatches, micro] :
       {std::pair<int64_t, int64_t>{1, 1}, {2, 1}, {1, 2}, {2, 2}}) {
    TrainOptions o;
    o.loss = builtin;
    o.settings = settings;
    o.minibatches = minibatches;
    o.microBatches = micro;
    TrainOptions of;
    of.lossFn = &fn;
    of.pad = pad;
    of.minibatches = minibatches;
    of.microBatches = micro;
    Trained want = trainOnce(valueHead, b, o);
    Trained got = trainOnce(valueHead, fnBatch, of);
    std::string what = fn.name() + ", " + std::to_string(minibatches) +
                       " minibatches of " + std::to_string(micro) +
                       " micro-batches";
    expectNear(got.stats.loss, want.stats.loss, what + ": loss", rel);
    expectNear(got.stats.gradNorm, want.stats.gradNorm, what + ": grad norm",
               rel);
    ASSERT_GT(want.stats.gradNorm, 0) << what;
    for (auto &[n, g] : want.grads) {
      ASSERT_TRUE(g.defined()) << what << ": " << n;
      expectClose(got.grads.at(n), g, what + ": grad of " + n, rel);
      expectClose(got.params.at(n), want.params.at(n), what + ": " + n, rel);
    }
  }
}

/// Token ids in [1, 512) with a few pads (0) in the prompts.
at::Tensor tokens(int64_t N, int64_t S, at::Generator &gen) {
  at::Tensor seq = at::randint(1, 512, {N, S}, gen, at::kLong);
  seq.select(1, 0).narrow(0, 0, N / 2).fill_(0);
  return seq;
}

/// The policy's logprobs at initialisation plus noise, so that ratios are
/// clipped on both sides.
at::Tensor noisyLogprobs(const at::Tensor &seq, at::Generator &gen) {
  ModelConfig cfg = tiny(false);
  LlamaModel m(cfg, initParams(cfg, 7), {});
  torch::NoGradGuard ng;
  at::Tensor lp = tokenLogprobs(m.forward(seq), seq);
  return lp + 0.3 * at::randn(lp.sizes(), gen);
}

TEST(FnBuiltins, PpoActorLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(21);
  const int64_t N = 8, S = 12;
  TrainBatch b;
  b.seq = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.oldLogprobs = noisyLogprobs(b.seq, gen);
  b.advantages = at::randn({N, S - 1}, gen);
  LossSettings ls;
  ls.clip = 0.2;
  TrainBatch fb;
  fb.fnInputs = {b.seq, b.oldLogprobs, b.advantages};
  fb.fnMasks = {b.lossMask};
  expectSameTraining(
      LossKind::PpoActor,
      subst(kPpoActor, {{"LO", 1 - ls.clip}, {"HI", 1 + ls.clip}}), false, b,
      fb, ls);
}

TEST(FnBuiltins, GrpoLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(22);
  const int64_t N = 8, S = 12;
  TrainBatch b;
  b.seq = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.oldLogprobs = noisyLogprobs(b.seq, gen);
  b.refLogprobs = noisyLogprobs(b.seq, gen);
  b.advantages = at::randn({N}, gen);
  LossSettings ls;
  ls.clip = 0.25;
  ls.kl = 0.05;
  TrainBatch fb;
  fb.fnInputs = {b.seq, b.oldLogprobs, b.advantages, b.refLogprobs};
  fb.fnMasks = {b.lossMask};
  expectSameTraining(
      LossKind::Grpo,
      subst(kGrpo, {{"LO", 1 - ls.clip}, {"HI", 1 + ls.clip}, {"KL", ls.kl}}),
      false, b, fb, ls);
}

TEST(FnBuiltins, PpoValueLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(23);
  const int64_t N = 8, S = 12;
  TrainBatch b;
  b.seq = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.oldValues = 0.3 * at::randn({N, S - 1}, gen);
  b.returns = at::randn({N, S - 1}, gen);
  LossSettings ls;
  ls.clip = 0.2;
  TrainBatch fb;
  fb.fnInputs = {b.seq, b.oldValues, b.returns};
  fb.fnMasks = {b.lossMask};
  expectSameTraining(
      LossKind::PpoValue,
      subst(kPpoValue, {{"CLIP", ls.clip}, {"NEGCLIP", -ls.clip}}), true, b, fb,
      ls);
}

// SFT on whole sequences: the built-in's mask is the non-pad predicted
// tokens, which mask_of takes when the input has no mask.
TEST(FnBuiltins, SftLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(24);
  const int64_t N = 8, S = 12, pad = 3;
  TrainBatch b;
  b.seq = at::randint(1, 6, {N, S}, gen, at::kLong); // many pads
  b.lossMask = (b.seq.narrow(1, 1, S - 1) != pad).to(at::kFloat);
  TrainBatch fb;
  fb.fnInputs = {b.seq};
  expectSameTraining(LossKind::Sft, kSft, false, b, fb, {}, pad);
}

TEST(FnBuiltins, DpoLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(25);
  const int64_t N = 8, S = 12;
  TrainBatch b;
  b.seq = tokens(N, S, gen);
  b.rejected = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.rejectedMask = generationMask(N, S - 1, gen);
  b.refLogprobs = noisyLogprobs(b.seq, gen);
  b.refRejected = noisyLogprobs(b.rejected, gen);
  LossSettings ls;
  ls.beta = 0.5;
  TrainBatch fb;
  fb.fnInputs = {b.seq, b.rejected, b.refLogprobs, b.refRejected};
  fb.fnMasks = {b.lossMask, b.rejectedMask};
  expectSameTraining(LossKind::Dpo, subst(kDpo, {{"BETA", ls.beta}}), false, b,
                     fb, ls);
}

TEST(FnBuiltins, RewardModelLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(26);
  const int64_t N = 8, S = 12;
  TrainBatch b;
  b.seq = tokens(N, S, gen);
  b.rejected = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.rejectedMask = generationMask(N, S - 1, gen);
  TrainBatch fb;
  fb.fnInputs = {b.seq, b.rejected};
  fb.fnMasks = {b.lossMask, b.rejectedMask};
  expectSameTraining(LossKind::Rm, kRm, true, b, fb);
}

// A host function is no loss, and a loss checks its batch.
TEST(FnBuiltins, TrainStepChecksTheFnBatch) {
  FnProgram host = FnProgram::parse(
      program("host", {"%0 = input 0 f1", "%1 = neg %0", "out x %1"}));
  FnProgram sft = FnProgram::parse(kSft);
  ModelConfig cfg = tiny(false);
  ParamMap p = initParams(cfg, 7);
  for (auto &[n, t] : p)
    t.requires_grad_(true);
  LlamaModel m(cfg, p, {});
  Adam opt(AdamSettings{});
  TrainBatch b;
  b.fnInputs = {at::randint(1, 512, {4, 6}, at::kLong)};
  auto msg = [&](const FnProgram &fn, const TrainBatch &batch) -> std::string {
    TrainOptions o;
    o.lossFn = &fn;
    try {
      trainStep(m, opt, batch, o);
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(msg(host, b), "fn 'f' is a host function, not a loss");
  TrainBatch none;
  EXPECT_EQ(msg(sft, none), "fn 'sft' takes 1 inputs, the batch has 0");
  TrainBatch floats;
  floats.fnInputs = {at::zeros({4, 6})};
  EXPECT_EQ(msg(sft, floats),
            "fn 'sft': line 2: input 0 (tok) must hold token ids, got Float");
  EXPECT_EQ(msg(sft, b), "");
}

//===----------------------------------------------------------------------===//
// The C entry points
//===----------------------------------------------------------------------===//

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

// A one-rank job: rlhf_apply gives rlhf_compute's GAE (values, masks, rows),
// and rlhf_train_fn trains a model exactly as rlhf_train trains its twin
// (two minibatches of two micro-batches, two epochs).
TEST(FnProgramCalls, ApplyAndTrainFnMatchTheBuiltIns) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 ("rlhf-fn-calls-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream data(dir / "prompts.jsonl");
    for (const char *s : {"abc", "hello", "xyz q", "rlhf", "fn code", "gae"})
      data << "{\"prompt\": \"" << s << "\"}\n";
  }
  ScopedEnv env;
  env.set("WORLD_SIZE", nullptr);
  env.set("RANK", nullptr);
  env.set("RLHF_DEVICE", nullptr);
  env.set("RLHF_PRECISION", nullptr);
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "0");
  env.set("RLHF_RENDEZVOUS_FILE", (dir / "port").c_str());
  std::vector<std::string> args = {"fn-test", "--out", (dir / "run").string(),
                                   "--quiet"};
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  optind = 1;
  rlhf_prog *p = rlhf_prog_create(int(argv.size()), argv.data(), "fn_test", 1,
                                  3, 0, 1, 0.0);
  const int64_t arch[] = {2, 64, 4, 2, 176, 512, 64, 0, 0, 0};
  const int64_t lay[] = {0, 1, 1, 1, 2};
  // Models of one architecture start equal; eps as in trainOnce.
  for (const char *name : {"a", "b"})
    rlhf_prog_add_model(p, name, arch, 1, 1e-3, 0.9, 0.95, 1.0, 0.0, 1.0,
                        nullptr, lay);
  rlhf_prog_add_dataset(p, "prompts", (dir / "prompts.jsonl").c_str(), 4, 8, 6,
                        "prompt");
  const int64_t step = rlhf_prog_start(p);
  rlhf_step_begin(p, step);
  rlhf_value *gen =
      rlhf_generate(p, 0, rlhf_field(p, rlhf_load(p, 0, step), "prompt"), lay,
                    6, 2, 1.0, 1.0, 0, "generate");
  rlhf_value *seq = rlhf_field(p, gen, "seq"),
             *lp = rlhf_field(p, gen, "logprobs");
  const int64_t N = seq->rows, T = seq->t.size(1) - 1;
  ASSERT_EQ(N, 8);
  ASSERT_TRUE(lp->mask.defined());
  auto g = at::make_generator<at::CPUGeneratorImpl>(31);
  rlhf_value *score =
      tensorValue(p, at::randn({N}, g), at::Tensor(), N, std::nullopt);
  rlhf_value *values =
      tensorValue(p, at::randn({N, T}, g), at::Tensor(), N, std::nullopt);
  rlhf_value *ref = tensorValue(p, lp->t + 0.1 * at::randn({N, T}, g), lp->mask,
                                N, std::nullopt);
  rlhf_value *builtinIn[] = {score, values, lp, ref};
  rlhf_value *want = rlhf_compute(p, RLHF_COMPUTE_GAE, 4, builtinIn,
                                  "gamma=0.99,lam=0.9,kl=0.05", "gae");
  const std::string gaeCode = subst(
      kGae, {{"NEGKL", -0.05}, {"GAMMA", 0.99}, {"GAMMALAM", 0.99 * 0.9}});
  for (int round = 0; round < 2; ++round) { // the second from the cache
    rlhf_value *got = rlhf_apply(p, gaeCode.c_str(), 4, builtinIn, "gae fn");
    ASSERT_TRUE(got->isRecord);
    EXPECT_EQ(got->fields.size(), 2u);
    for (const char *name : {"advantages", "returns"}) {
      rlhf_value *w = rlhf_field(p, want, name), *v = rlhf_field(p, got, name);
      expectClose(v->t, w->t, name);
      EXPECT_EQ(v->rows, N) << name;
      EXPECT_FALSE(v->layout) << name << " is replicated";
      // The mask of the first input that has one: the logprobs'.
      ASSERT_TRUE(v->mask.defined()) << name;
      EXPECT_TRUE(at::equal(v->mask, lp->mask)) << name;
    }
  }
  // A per-sequence output has no mask; a scalar one row.
  rlhf_value *stats =
      rlhf_apply(p,
                 "rlhf.fn 1 stats host\n%0 = input 0 f1\n%1 = batch_mean %0\n"
                 "%2 = neg %0\nout mean %1\nout neg %2",
                 1, &score, "stats");
  rlhf_value *mean = rlhf_field(p, stats, "mean"),
             *neg = rlhf_field(p, stats, "neg");
  EXPECT_FLOAT_EQ(mean->t.item<float>(), score->t.mean().item<float>());
  EXPECT_EQ(mean->rows, 1);
  EXPECT_FALSE(neg->mask.defined());
  EXPECT_TRUE(at::equal(neg->t, -score->t));

  std::map<std::string, at::Tensor> before;
  for (auto &[n, t] : p->models[0].params)
    before[n] = t.detach().clone();
  rlhf_value *adv = rlhf_field(p, want, "advantages");
  rlhf_value *trainIn[] = {seq, lp, adv};
  rlhf_value *la = rlhf_train(p, 0, RLHF_LOSS_PPO_ACTOR, 3, trainIn, lay, 2, 2,
                              "clip=0.2", "train a");
  const std::string ppo = subst(kPpoActor, {{"LO", 1 - 0.2}, {"HI", 1 + 0.2}});
  rlhf_value *lb = rlhf_train_fn(p, 1, ppo.c_str(), 3, trainIn, lay, 2, 2,
                                 "clip=0.2", "train b");
  expectNear(rlhf_field(p, lb, "loss")->t.item<double>(),
             rlhf_field(p, la, "loss")->t.item<double>(), "loss");
  const ModelState &a = p->models[0], &b = p->models[1];
  EXPECT_EQ(b.trainCalls, 1);
  double moved = 0;
  for (auto &[n, t] : a.params) {
    expectClose(b.params.at(n), t, "after training: " + n);
    moved = std::max(moved, (t - before.at(n)).abs().max().item<double>());
  }
  EXPECT_GT(moved, 1e-6) << "training moved no weight";
  rlhf_step_end(p, step);
  EXPECT_EQ(rlhf_prog_finish(p), 0);
  fs::remove_all(dir);
}

} // namespace
