//===- FnProgramTest.cpp - fn code: verifier and ops ----------------------===//
//
// The fn code ABI (rlhf/runtime/FnProgram.h): programs the verifier rejects
// and why, and every op on small tensors computed by hand.
//
//===----------------------------------------------------------------------===//

#include "FnTestUtil.h"

using namespace rlhf;
using namespace rlhf::fntest;

namespace {

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

TEST(FnVerifier, RejectsBadPrograms) {
  expectRejected({
      {"rlhf.fun 1 f host\n%0 = input 0 f1\nout x %0",
       "fn code: line 1: expected the header 'rlhf.fn 1 NAME MODE', got "
       "'rlhf.fun 1 f host'"},
      {"rlhf.fn 3 f host\n%0 = input 0 f1\nout x %0",
       "fn 'f': line 1: fn code version 3 is not supported; this runtime "
       "reads versions 1 and 2"},
      // The call site is version 2's, right after the header.
      {"rlhf.fn 1 f host\nat p.rlhf:3:1\n%0 = input 0 f1\nout x %0",
       "fn 'f': line 2: expected '%0 = OP ...' or 'out NAME %i', got 'at'"},
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
      {program("loss",
               {"%0 = input 0 tok", "%1 = logprobs %0", "%2 = mask_of %0",
                "%3 = token_mean %1 %2", "out a %3", "out b %1"}),
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
  });
}

// Version 2 names the call site, and errors at run time say it.
TEST(FnVerifier, CallSiteOfVersion2) {
  FnProgram p = FnProgram::parse(
      "rlhf.fn 2 f host\nat my prog.rlhf:12:7\n%0 = input 0 f1\nout x %0");
  EXPECT_EQ(p.describe(), "fn 'f' (called at my prog.rlhf:12:7)");
  EXPECT_EQ(FnProgram::parse("rlhf.fn 2 f host\n%0 = input 0 f1\nout x %0")
                .describe(),
            "fn 'f'");
  try {
    p.evaluate(FnInputs{{at::zeros({2, 3})}, {}, 0});
    ADD_FAILURE() << "a rank-2 tensor for an f1 input";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()).rfind(
                  "fn 'f' (called at my prog.rlhf:12:7): line 3: ", 0),
              0u)
        << e.what();
  }
}

// Nothing a program can say crashes the parser: every prefix and every
// line dropped gives a program or an rlhf::Error.
TEST(FnVerifier, MangledProgramsFailCleanly) {
  std::string good = program(
      "loss", {"%0 = input 0 tok", "%1 = input 1 f1", "%2 = logprobs %0",
               "%3 = mask_of %0", "%4 = token_mean %2 %3", "%5 = batch_sum %1",
               "%6 = add %4 %5", "out loss %6"});
  ASSERT_EQ(errorOf(good), "");
  // Every prefix, and every one-byte change to a digit, an operand sigil,
  // a space or a newline: an error that names the fn, or a valid program,
  // never a crash. Most of them must be refused.
  size_t refused = 0, tried = 0;
  auto check = [&](const std::string &text) {
    std::string msg = errorOf(text);
    ++tried;
    if (!msg.empty()) {
      ++refused;
      EXPECT_EQ(msg.rfind("fn ", 0), 0u) << msg;
    }
  };
  for (size_t n = 0; n < good.size(); ++n)
    check(good.substr(0, n));
  for (size_t i = 0; i < good.size(); ++i)
    for (char c : {'9', '%', ' ', '\n'})
      if (good[i] != c) {
        std::string bad = good;
        bad[i] = c;
        check(bad);
      }
  EXPECT_GT(refused, tried / 2);
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
  // Near 0 they keep the digits that log(1 + x) and exp(x) - 1 lose in
  // float: 1 + 1e-8 rounds to 1.
  at::Tensor tiny = f({1e-8f, -1e-8f, 0.5f}, {3});
  auto w =
      run(program("host", {"%0 = input 0 f1", "%1 = log1p %0", "%2 = expm1 %0",
                           "out log1p %1", "out expm1 %2"}),
          {tiny});
  EXPECT_TRUE(at::allclose(w[0], at::log1p(tiny.to(at::kDouble)).to(at::kFloat),
                           1e-6, 0));
  EXPECT_TRUE(at::allclose(w[1], at::expm1(tiny.to(at::kDouble)).to(at::kFloat),
                           1e-6, 0));
  EXPECT_NE(w[0][0].item<float>(), 0.f);
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

// Padding may hold an inf (the log of a masked 0): masked positions count
// for nothing, as in a sum over the real ones, not nan as inf * 0 gives.
TEST(FnOps, MaskedPositionsHoldingInfAreIgnored) {
  const float inf = std::numeric_limits<float>::infinity();
  at::Tensor v = f({1, -inf, 3, inf}, {2, 2}), m = f({1, 0, 1, 0}, {2, 2});
  auto tok = run(
      program("host",
              {"%0 = input 0 f2", "%1 = input 1 f2", "%2 = token_sum %0 %1",
               "%3 = token_mean %0 %1", "%4 = token_var %0 %1 0",
               "%5 = seq_mean %0 %1", "%6 = const 0.5", "%7 = rcumsum %0 %6 %1",
               "%8 = next_masked %0 %1", "out sum %2", "out mean %3",
               "out var %4", "out seq %5", "out r %7", "out n %8"}),
      {v, m});
  EXPECT_FLOAT_EQ(tok[0].item<float>(), 4);
  EXPECT_FLOAT_EQ(tok[1].item<float>(), 2);
  EXPECT_FLOAT_EQ(tok[2].item<float>(), 1);
  EXPECT_TRUE(at::equal(tok[3], f({1, 3}, {2}))) << tok[3];
  EXPECT_TRUE(at::equal(tok[4], f({1, 0, 3, 0}, {2, 2}))) << tok[4];
  EXPECT_TRUE(at::equal(tok[5], f({0, 0, 0, 0}, {2, 2}))) << tok[5];
  // In a loss too, with finite gradients.
  FnProgram p = FnProgram::parse(
      program("loss", {"%0 = input 0 tok", "%1 = input 1 f2",
                       "%2 = logprobs %0", "%3 = mask_of %0", "%4 = add %2 %1",
                       "%5 = token_mean %4 %3", "out loss %5"}));
  const int64_t N = 2, S = 3, V = 5;
  at::Tensor seq = at::randint(1, V, {N, S}, at::kLong);
  at::Tensor logits = at::randn({N, S, V}).requires_grad_(true);
  FnModel model = [&](int64_t, const at::Tensor &) { return logits; };
  FnInputs in{{seq, v}, {m}, 0};
  std::vector<double> d = p.localDenominators(in);
  at::Tensor loss = p.evaluate(in, &model, &d).at(0);
  at::Tensor want = ((tokenLogprobs(logits, seq) * m).sum() + 4) / 2;
  EXPECT_NEAR(loss.item<double>(), want.item<double>(), 1e-5);
  loss.backward();
  EXPECT_TRUE(at::isfinite(logits.grad()).all().item<bool>()) << logits.grad();
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

} // namespace
