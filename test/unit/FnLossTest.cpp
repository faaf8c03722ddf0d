//===- FnLossTest.cpp - fn code: losses and state across calls ------------===//
//
// Losses on a stand-in model (rlhf/runtime/FnProgram.h): gradients,
// denominators and model outputs; and what functions keep across calls:
// `adaptive_kl`, the coefficient the run adapts, with its controller, and
// running moments.
//
//===----------------------------------------------------------------------===//

#include "FnTestUtil.h"

#include <cmath>

using namespace rlhf;
using namespace rlhf::fntest;

namespace {

//===----------------------------------------------------------------------===//
// Losses on a stand-in model
//===----------------------------------------------------------------------===//

// CISPO's weight: stop_gradient keeps the clipped ratio's value and drops
// its gradient, so d loss / d logits is the weight times d log-prob.
TEST(FnLoss, StopGradientKeepsTheValueWithoutTheGradient) {
  auto cispo = [](bool stop) {
    return FnProgram::parse(program(
        "loss",
        {"%0 = input 0 tok", "%1 = input 1 f2", "%2 = input 2 f1",
         "%3 = logprobs %0", "%4 = mask_of %0", "%5 = sub %3 %1", "%6 = exp %5",
         "%7 = const 0", "%8 = const 1.2", "%9 = clamp %6 %7 %8",
         stop ? "%10 = stop_gradient %9" : "%10 = add %9 %7",
         "%11 = broadcast %2 %3", "%12 = mul %10 %11", "%13 = mul %12 %3",
         "%14 = neg %13", "%15 = token_mean %14 %4", "out loss %15"}));
  };
  const int64_t N = 2, S = 4, V = 5;
  at::Tensor seq = at::randint(1, V, {N, S}, at::kLong);
  at::Tensor mask = f({1, 1, 1, 0, 1, 1}, {N, S - 1});
  at::Tensor logits = at::randn({N, S, V}).requires_grad_(true);
  // Old log-probs near the model's, some ratios past the clip.
  at::Tensor old =
      (tokenLogprobs(logits, seq) + at::randn({N, S - 1}) * 0.5).detach();
  at::Tensor adv = f({1.5, -0.5}, {N});
  FnInputs in{{seq, old, adv}, {mask}, 0};
  FnModel model = [&](int64_t, const at::Tensor &) { return logits; };
  auto grad = [&](const at::Tensor &loss) {
    logits.mutable_grad() = at::Tensor();
    loss.backward();
    return logits.grad().clone();
  };
  at::Tensor lp = tokenLogprobs(logits, seq);
  at::Tensor w = (lp - old).exp().clamp(0, 1.2).detach();
  at::Tensor want = -(w * adv.unsqueeze(1) * lp * mask).sum() / mask.sum();
  const double wantValue = want.item<double>();
  at::Tensor gWant = grad(want);
  at::Tensor stopped = cispo(true).evaluate(in, &model).at(0);
  EXPECT_NEAR(stopped.item<double>(), wantValue, 1e-5);
  expectClose(grad(stopped), gWant, "d loss / d logits");
  // Through the weight the gradient differs: the test sees the stop.
  at::Tensor through = cispo(false).evaluate(in, &model).at(0);
  EXPECT_NEAR(through.item<double>(), wantValue, 1e-5);
  EXPECT_GT((grad(through) - gWant).abs().max().item<double>(), 1e-4);
}

// A sequence's extremes in a loss: the value of the largest (smallest)
// masked log-prob, with the gradient on that token alone; a row with no
// masked token gives 0 and no gradient. Over the batch or its tokens they
// are refused: a micro-batch's extreme is not the batch's.
TEST(FnLoss, SequenceExtremesAndTheirGradients) {
  // A loss of the sum over rows of op %4, `op` (per sequence).
  auto code = [](const std::string &op) {
    return program("loss", {"%0 = input 0 tok", "%1 = logprobs %0",
                            "%2 = mask_of %0", "%3 = seq_sum %1 %2"}) +
           "\n" + op + "\n%5 = batch_sum %4\nout loss %5";
  };
  auto prog = [&](const char *stat) {
    return FnProgram::parse(code(std::string("%4 = seq_") + stat + " %1 %2"));
  };
  const int64_t N = 3, S = 4, V = 6;
  at::Tensor seq = at::randint(1, V, {N, S}, at::kLong);
  at::Tensor mask = f({1, 1, 0, 0, 1, 1, 0, 0, 0}, {N, S - 1});
  FnInputs in{{seq}, {mask}, 0};
  for (bool max : {true, false}) {
    at::Tensor logits = at::randn({N, S, V}).requires_grad_(true);
    FnModel model = [&](int64_t, const at::Tensor &) { return logits; };
    std::vector<double> d = {1};
    at::Tensor loss = prog(max ? "max" : "min").evaluate(in, &model, &d).at(0);
    loss.backward();
    at::Tensor g = logits.grad().clone();
    logits.mutable_grad() = at::Tensor();
    // By hand: row 0's tokens 0-1, row 1's tokens 1-2, row 2 none.
    at::Tensor lp = tokenLogprobs(logits, seq);
    auto pick = [&](at::Tensor a, at::Tensor b) {
      return max ? at::maximum(a, b) : at::minimum(a, b);
    };
    at::Tensor want = pick(lp[0][0], lp[0][1]) + pick(lp[1][1], lp[1][2]);
    EXPECT_NEAR(loss.item<double>(), want.item<double>(), 1e-5);
    want.backward();
    expectClose(g, logits.grad(), max ? "d seq_max" : "d seq_min");
    EXPECT_EQ(g[2].abs().sum().item<double>(), 0.0)
        << "a row with no masked token passes no gradient";
  }
  expectRejected(
      {{code("%4 = token_max %1 %2"),
        "fn 'f': line 6: 'token_max' is not allowed in a loss: it needs the "
        "whole batch, which micro-batches split"},
       {code("%4 = batch_min %3"),
        "fn 'f': line 6: 'batch_min' is not allowed in a loss: it needs the "
        "whole batch, which micro-batches split"}});
}

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

// A model that gives per-token statistics (LlamaModel::tokenStats under sp
// or tp) is asked once per token input, for every statistic the program
// reads of it: one forward pass for a policy loss with an entropy bonus.
TEST(FnLoss, TokenStatsAskedOncePerInput) {
  FnProgram p = FnProgram::parse(program(
      "loss",
      {"%0 = input 0 tok", "%1 = input 1 tok", "%2 = logprobs %0",
       "%3 = entropy %0", "%4 = logprobs %1", "%5 = mask_of %0",
       "%6 = token_sum %2 %5", "%7 = token_sum %3 %5", "%8 = token_sum %4 %5",
       "%9 = add %6 %7", "%10 = add %9 %8", "out loss %10"}));
  const int64_t N = 2, S = 4;
  at::Tensor a = at::ones({N, S}, at::kLong), b = a + 1;
  at::Tensor mask = at::ones({N, S - 1});
  std::vector<std::tuple<int64_t, bool, bool, bool>> asked;
  FnTokenStat stat = [&](int64_t input, const at::Tensor &tokens, bool logprobs,
                         bool entropy, bool entropyGrad) {
    asked.emplace_back(input, logprobs, entropy, entropyGrad);
    at::Tensor base = tokens.narrow(1, 0, S - 1).to(at::kFloat);
    return std::pair(logprobs ? -base : at::Tensor(),
                     entropy ? base * 10 : at::Tensor());
  };
  FnModel none = [](int64_t, const at::Tensor &) -> at::Tensor {
    ADD_FAILURE() << "whole logits asked for";
    return {};
  };
  at::Tensor loss = p.evaluate({{a, b}, {mask}, 0}, &none, nullptr, &stat)[0];
  // -1 and 10 per token of a, -2 per token of b, over N (S-1) tokens.
  EXPECT_FLOAT_EQ(loss.item<float>(), (-1 + 10 - 2) * N * (S - 1));
  ASSERT_EQ(asked.size(), 2u);
  // The entropy is in the loss: it needs its gradient.
  EXPECT_EQ(asked[0], std::make_tuple(int64_t(0), true, true, true));
  EXPECT_EQ(asked[1], std::make_tuple(int64_t(1), true, false, false));

  // An entropy that only a metric reads is asked for without a gradient.
  FnProgram metric = FnProgram::parse(program(
      "loss", {"%0 = input 0 tok", "%1 = logprobs %0", "%2 = entropy %0",
               "%3 = mask_of %0", "%4 = token_sum %1 %3",
               "%5 = token_mean %2 %3", "out loss %4", "out entropy %5"}));
  asked.clear();
  std::vector<at::Tensor> out =
      metric.evaluate({{a}, {mask}, 0}, &none, nullptr, &stat);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], std::make_tuple(int64_t(0), true, true, false));
  EXPECT_FLOAT_EQ(out[1].item<float>(), 10);
}

//===----------------------------------------------------------------------===//
// adaptive_kl
//===----------------------------------------------------------------------===//

TEST(FnKlControl, VerifierRules) {
  FnProgram p = FnProgram::parse(
      program("host", {"%0 = input 0 f1", "%1 = adaptive_kl 0.05 0.1 1000",
                       "%2 = mul %1 %0", "%3 = batch_mean %0", "out score %2",
                       "out kl %3"}));
  const std::optional<FnControl> &kl = p.controls()[0];
  ASSERT_TRUE(kl.has_value());
  EXPECT_EQ(kl->kind, FnControl::Kind::Kl);
  EXPECT_EQ(kl->init, 0.05);
  EXPECT_EQ(kl->target, 0.1);
  EXPECT_EQ(kl->horizon, 1000);
  EXPECT_FALSE(p.controls()[1].has_value());
  EXPECT_EQ(p.outputIndex("kl"), 1);
  EXPECT_EQ(p.outputIndex("nope"), -1);
  EXPECT_FALSE(
      FnProgram::parse(program("host", {"%0 = input 0 f1", "out x %0"}))
          .controls()[0]
          .has_value());
  expectRejected({
      {program("host", {"%0 = input 0 f1", "%1 = adaptive_kl 0.05 0.1 1000",
                        "%2 = mul %1 %0", "out score %2"}),
       "fn 'f': line 3: 'adaptive_kl' adapts to the KL the function "
       "measures, but it has no rank-0 output 'kl'"},
      // The coefficient follows a number, not a per-row value.
      {program("host", {"%0 = input 0 f1", "%1 = adaptive_kl 0.05 0.1 1000",
                        "%2 = mul %1 %0", "out kl %2"}),
       "fn 'f': line 3: 'adaptive_kl' adapts to the KL the function "
       "measures, but it has no rank-0 output 'kl'"},
      {program("host", {"%0 = input 0 f1", "%1 = adaptive_kl 0.05 0.1 1000",
                        "%2 = adaptive_kl 0.05 0.1 1000", "%3 = batch_mean %0",
                        "out kl %3"}),
       "fn 'f': line 4: a second 'adaptive_kl'; a function adapts one such "
       "coefficient"},
      {program("host", {"%0 = input 0 f1", "%1 = adaptive_kl 0 0.1 1000",
                        "%2 = batch_mean %0", "out kl %2"}),
       "fn 'f': line 3: 'adaptive_kl' needs an initial value and a target "
       "above 0 and a horizon of at least 1, got 0 0.1 1000"},
      {program("host", {"%0 = input 0 f1", "%1 = adaptive_kl 0.1 nan 1000",
                        "%2 = batch_mean %0", "out kl %2"}),
       "fn 'f': line 3: 'adaptive_kl' needs an initial value and a target "
       "above 0 and a horizon of at least 1, got 0.1 nan 1000"},
      {program("host", {"%0 = input 0 f1", "%1 = adaptive_kl 0.1 0.1",
                        "%2 = batch_mean %0", "out kl %2"}),
       "fn 'f': line 3: 'adaptive_kl' takes 3 operands (adaptive_kl X X X), "
       "got 2"},
      // In a loss, `kl` is a metric: the loss itself cannot be it.
      {program("loss",
               {"%0 = input 0 tok", "%1 = adaptive_kl 0.1 0.1 100",
                "%2 = logprobs %0", "%3 = mask_of %0", "%4 = token_mean %2 %3",
                "%5 = mul %1 %4", "out kl %5"}),
       "fn 'f': line 3: 'adaptive_kl' adapts to the KL the function "
       "measures, but it has no rank-0 output 'kl' after the loss"},
  });
}

TEST(FnKlControl, EvaluatesToTheRunsCoefficient) {
  FnProgram p = FnProgram::parse(
      program("host", {"%0 = input 0 f1", "%1 = adaptive_kl 0.5 0.1 1000",
                       "%2 = mul %1 %0", "%3 = batch_mean %0", "out score %2",
                       "out kl %3"}));
  at::Tensor x = at::tensor({1.0f, -2.0f, 4.0f});
  FnInputs in{{x}, {at::Tensor()}, 0};
  // Before the run sets it, the initial value.
  EXPECT_TRUE(at::equal(p.evaluate(in)[0], x * 0.5f));
  in.coefs[0] = 2.0;
  EXPECT_TRUE(at::equal(p.evaluate(in)[0], x * 2.0f));
  // In a loss it is a constant factor of a batch reduction, which the
  // micro-batch rule allows.
  EXPECT_EQ(errorOf(program("loss",
                            {"%0 = input 0 tok", "%1 = adaptive_kl 0.1 0.1 100",
                             "%2 = logprobs %0", "%3 = mask_of %0",
                             "%4 = token_mean %2 %3", "%5 = mul %1 %4",
                             "out loss %5", "out kl %4"})),
            "");
}

// Ziegler et al.'s controller: the error against the target, clipped to
// 20%, moves the coefficient by rows / horizon of it.
TEST(FnKlControl, ProportionalUpdate) {
  FnControl c;
  c.init = c.target = 0.1;
  c.horizon = 1000;
  auto next = [&](double m, int64_t rows) {
    return c.next(c.start(), m, rows).value;
  };
  EXPECT_DOUBLE_EQ(next(0.1, 100), 0.1);         // on target
  EXPECT_DOUBLE_EQ(next(0.11, 100), 0.1 * 1.01); // 10% over
  EXPECT_DOUBLE_EQ(next(0.09, 100), 0.1 * 0.99); // 10% under
  EXPECT_DOUBLE_EQ(next(5.0, 100), 0.1 * 1.02);  // clipped at +20%
  EXPECT_DOUBLE_EQ(next(0.0, 100), 0.1 * 0.98);  // clipped at -20%
  EXPECT_DOUBLE_EQ(next(0.2, 500), 0.1 * 1.1);   // more rows
  // No measure holds it.
  EXPECT_EQ(next(std::nan(""), 100), 0.1);
  EXPECT_EQ(next(INFINITY, 100), 0.1);
  EXPECT_TRUE(c.next(c.start(), 5.0, 100).on);
}

//===----------------------------------------------------------------------===//
// adaptive_entropy
//===----------------------------------------------------------------------===//

TEST(FnEntropyControl, VerifierRules) {
  FnProgram p = FnProgram::parse(program(
      "host", {"%0 = input 0 f1", "%1 = adaptive_entropy 0 0.2 0.0001 0.005 0",
               "%2 = mul %1 %0", "%3 = batch_mean %0", "out score %2",
               "out entropy %3"}));
  const std::optional<FnControl> &e = p.controls()[1];
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, FnControl::Kind::Entropy);
  EXPECT_EQ(e->target, 0.2);
  EXPECT_EQ(e->delta, 0.0001);
  EXPECT_EQ(e->max, 0.005);
  EXPECT_EQ(e->min, 0);
  EXPECT_FALSE(p.controls()[0].has_value());
  // One of each kind may stand in one function.
  EXPECT_EQ(
      errorOf(program("host",
                      {"%0 = input 0 f1", "%1 = adaptive_kl 0.05 0.1 1000",
                       "%2 = adaptive_entropy 0 0.2 0.001 0.01 0",
                       "%3 = mul %1 %0", "%4 = mul %2 %3", "%5 = batch_mean %0",
                       "out score %4", "out kl %5", "out entropy %5"})),
      "");
  expectRejected({
      {program("host",
               {"%0 = input 0 f1", "%1 = adaptive_entropy 0 0.2 0.001 0.01 0",
                "%2 = mul %1 %0", "%3 = batch_mean %0", "out score %2",
                "out kl %3"}),
       "fn 'f': line 3: 'adaptive_entropy' adapts to the entropy the "
       "function measures, but it has no rank-0 output 'entropy'"},
      {program("host",
               {"%0 = input 0 f1", "%1 = adaptive_entropy 0 0.2 0.001 0.01 0",
                "%2 = adaptive_entropy 0 0.2 0.001 0.01 0",
                "%3 = batch_mean %0", "out entropy %3"}),
       "fn 'f': line 4: a second 'adaptive_entropy'; a function adapts one "
       "such coefficient"},
      // The initial value must lie within the bounds.
      {program("host", {"%0 = input 0 f1",
                        "%1 = adaptive_entropy 0.02 0.2 0.001 0.01 0",
                        "%2 = batch_mean %0", "out entropy %2"}),
       "fn 'f': line 3: 'adaptive_entropy' needs a target and a step above 0 "
       "and 0 <= min <= init <= max, got 0.02 0.2 0.001 0.01 0"},
      {program("host",
               {"%0 = input 0 f1", "%1 = adaptive_entropy 0 0.2 0 0.01 0",
                "%2 = batch_mean %0", "out entropy %2"}),
       "fn 'f': line 3: 'adaptive_entropy' needs a target and a step above 0 "
       "and 0 <= min <= init <= max, got 0 0.2 0 0.01 0"},
  });
}

// Skywork-OR1's EntController: a step of delta up while the entropy is
// under the target and down otherwise, within [min, max]; the coefficient
// applies only while the last entropy was under the target.
TEST(FnEntropyControl, StepsTowardTheTarget) {
  FnControl c;
  c.kind = FnControl::Kind::Entropy;
  c.init = 0;
  c.target = 0.2;
  c.delta = 0.001;
  c.max = 0.0025;
  c.min = 0;
  FnControl::State s = c.start();
  EXPECT_EQ(FnControl::coefficient(s), 0.0);
  s = c.next(s, 0.1, 64); // under the target: up, and on
  EXPECT_DOUBLE_EQ(s.value, 0.001);
  EXPECT_TRUE(s.on);
  EXPECT_DOUBLE_EQ(FnControl::coefficient(s), 0.001);
  s = c.next(s, 0.1, 64);
  s = c.next(s, 0.1, 64); // capped at max
  EXPECT_DOUBLE_EQ(s.value, 0.0025);
  s = c.next(s, 0.3, 64); // over: down, and off
  EXPECT_DOUBLE_EQ(s.value, 0.0015);
  EXPECT_FALSE(s.on);
  EXPECT_EQ(FnControl::coefficient(s), 0.0);
  s = c.next(s, 0.2, 64); // at the target counts as over
  s = c.next(s, 0.5, 64); // floored at min
  EXPECT_DOUBLE_EQ(s.value, 0.0);
  // No measure holds it.
  FnControl::State held = c.next(s, std::nan(""), 64);
  EXPECT_EQ(held.value, s.value);
  EXPECT_EQ(held.on, s.on);
}

TEST(FnEntropyControl, EvaluatesToTheRunsCoefficient) {
  FnProgram p = FnProgram::parse(program(
      "host", {"%0 = input 0 f1",
               "%1 = adaptive_entropy 0.001 0.2 0.001 0.01 0", "%2 = mul %1 %0",
               "%3 = batch_mean %0", "out score %2", "out entropy %3"}));
  at::Tensor x = at::tensor({1.0f, -2.0f, 4.0f});
  FnInputs in{{x}, {at::Tensor()}, 0};
  EXPECT_TRUE(at::allclose(p.evaluate(in)[0], x * 0.001f));
  in.coefs[1] = 0.0;
  EXPECT_TRUE(at::equal(p.evaluate(in)[0], x * 0.0f));
}

//===----------------------------------------------------------------------===//
// running_mean, running_std
//===----------------------------------------------------------------------===//

// Chan et al.'s merge gives the moments of all rows, batch by batch.
TEST(FnRunning, MomentsMergeBatches) {
  FnMoments m;
  EXPECT_EQ(m.stdDev(), 0);
  m.add(at::tensor({1.0f}));
  EXPECT_EQ(m.mean, 1);
  EXPECT_EQ(m.stdDev(), 0); // one row: no spread yet
  m.add(at::tensor({2.0f, 3.0f, 6.0f}));
  m.add(at::tensor({-4.0f, 10.0f}));
  const at::Tensor all =
      at::tensor({1.0, 2.0, 3.0, 6.0, -4.0, 10.0}, at::kDouble);
  EXPECT_EQ(m.count, 6);
  EXPECT_NEAR(m.mean, all.mean().item<double>(), 1e-12);
  EXPECT_NEAR(m.stdDev(), all.std().item<double>(), 1e-12); // over n - 1
}

TEST(FnRunning, StateAcrossCallsAndHeldInEvaluation) {
  FnProgram p = FnProgram::parse(program(
      "host", {"%0 = input 0 f1", "%1 = running_mean %0", "%2 = running_std %0",
               "%3 = sub %0 %1", "out score %3", "out m %1", "out s %2"}));
  EXPECT_TRUE(p.keepsMoments());
  auto call = [&](at::Tensor x, FnRunning *state, bool hold = false) {
    FnInputs in{{x}, {at::Tensor()}, 0};
    in.running = state;
    in.holdRunning = hold;
    std::vector<at::Tensor> out = p.evaluate(in);
    return std::make_pair(out[1].item<double>(), out[2].item<double>());
  };
  const at::Tensor a = at::tensor({1.0f, 2.0f}), b = at::tensor({6.0f, 7.0f});
  // Without a state, the call's rows alone.
  EXPECT_FLOAT_EQ(call(b, nullptr).first, 6.5f);
  FnRunning state;
  // An evaluation before any call reads its own rows, and keeps nothing.
  EXPECT_FLOAT_EQ(call(a, &state, true).first, 1.5f);
  EXPECT_TRUE(state.moments.empty());
  EXPECT_FLOAT_EQ(call(a, &state).first, 1.5f);
  // Both ops follow one value: its rows count once per call.
  auto [mean, sd] = call(b, &state);
  EXPECT_EQ(state.moments.at(0).count, 4);
  EXPECT_FLOAT_EQ(mean, 4.0f);
  EXPECT_FLOAT_EQ(
      sd,
      float(
          at::tensor({1.0, 2.0, 6.0, 7.0}, at::kDouble).std().item<double>()));
  // An evaluation reads the run's moments and adds nothing.
  EXPECT_FLOAT_EQ(call(at::tensor({100.0f}), &state, true).first, 4.0f);
  EXPECT_EQ(state.moments.at(0).count, 4);
}

TEST(FnRunning, VerifierRules) {
  EXPECT_FALSE(
      FnProgram::parse(program("host", {"%0 = input 0 f1", "out x %0"}))
          .keepsMoments());
  expectRejected({
      {program("loss",
               {"%0 = input 0 tok", "%1 = input 1 f1", "%2 = running_mean %1",
                "%3 = logprobs %0", "%4 = mask_of %0", "%5 = token_mean %3 %4",
                "%6 = mul %2 %5", "out loss %6"}),
       "fn 'f': line 4: 'running_mean' keeps statistics across calls, which "
       "only a host function may do; compute them before the train call"},
      {program("host", {"%0 = input 0 f2", "%1 = running_std %0", "out s %1"}),
       "fn 'f': line 3: 'running_std' needs rank 1 for operand 1, %0 (rank "
       "2) is not"},
  });
}

} // namespace
