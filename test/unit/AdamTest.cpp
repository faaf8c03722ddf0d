//===- AdamTest.cpp - Adam's update against a reference -------------------===//
//
// Adam::step through ATen's fused kernel (the default) and through separate
// ops gives AdamW as written out here in double precision: fp32 weights, bf16
// weights on fp32 masters, a clipped step (gradScale) and a non-contiguous
// parameter, which takes separate ops whatever the setting.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Train.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace rlhf;

namespace {

constexpr int kSteps = 3;
constexpr double kScale = 0.5; // a clipped step

/// Weights after kSteps AdamW steps with the same gradients, in double.
at::Tensor reference(at::Tensor w, const at::Tensor &grad,
                     const AdamSettings &s) {
  w = w.to(at::kDouble);
  at::Tensor g = grad.to(at::kDouble) * kScale;
  at::Tensor m = at::zeros_like(w), v = at::zeros_like(w);
  for (int t = 1; t <= kSteps; ++t) {
    m = s.beta1 * m + (1 - s.beta1) * g;
    v = s.beta2 * v + (1 - s.beta2) * g * g;
    at::Tensor mHat = m / (1 - std::pow(s.beta1, t)),
               vHat = v / (1 - std::pow(s.beta2, t));
    w = w * (1 - s.lr * s.weightDecay) - s.lr * mHat / (vHat.sqrt() + s.eps);
  }
  return w;
}

struct Case {
  at::ScalarType dtype;
  bool fused;
};

class AdamUpdate : public ::testing::TestWithParam<Case> {};

TEST_P(AdamUpdate, MatchesAdamWInDouble) {
  const Case c = GetParam();
  at::manual_seed(3);
  ParamMap params;
  std::map<std::string, at::Tensor> initial, grads;
  initial["a"] = at::randn({64, 48}) * 0.02;
  initial["b"] = at::randn({1000}) * 0.02;
  // A transposed view: not contiguous, so never the fused kernel.
  initial["t"] = (at::randn({24, 16}) * 0.02).t();
  for (auto &[n, w] : initial) {
    params[n] = w.clone().to(c.dtype); // keeps the view's strides
    ASSERT_EQ(params[n].is_contiguous(), n != "t");
    grads[n] = at::randn(w.sizes()) * 1e-2;
  }
  AdamSettings s;
  s.lr = 1e-2; // large enough that every step moves the weights visibly
  s.weightDecay = 0.1;
  s.fused = c.fused;
  Adam opt(s);
  for (int t = 0; t < kSteps; ++t) {
    std::map<std::string, at::Tensor> g; // Adam may leave them scaled
    for (auto &[n, x] : grads)
      g[n] = x.clone();
    opt.step(params, g, nullptr, kScale);
  }
  EXPECT_EQ(opt.steps(), kSteps);
  for (auto &[n, w0] : initial) {
    at::Tensor want =
        reference(c.dtype == at::kFloat ? w0 : w0.to(c.dtype), grads[n], s);
    // fp32 weights are updated in place; bf16 ones through their masters.
    at::Tensor got =
        c.dtype == at::kFloat ? params[n] : opt.masterWeights().at(n);
    ASSERT_EQ(got.scalar_type(), at::kFloat) << n;
    double moved = (want - w0.to(at::kDouble)).abs().max().item<double>();
    double err = (got.to(at::kDouble) - want).abs().max().item<double>();
    EXPECT_GT(moved, 1e-3) << n;
    EXPECT_LT(err, 1e-6) << n << ": the update is off by " << err;
    if (c.dtype != at::kFloat) { // the weights are their masters, rounded
      EXPECT_TRUE(at::equal(params[n], got.to(c.dtype))) << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Adam, AdamUpdate,
    ::testing::Values(Case{at::kFloat, true}, Case{at::kFloat, false},
                      Case{at::kBFloat16, true}, Case{at::kBFloat16, false}),
    [](const auto &i) {
      return std::string(i.param.dtype == at::kFloat ? "Fp32" : "Bf16") +
             (i.param.fused ? "Fused" : "SeparateOps");
    });

/// The rate per iteration, worked out by hand from #rlhf.optimizer's
/// description (lr/check of E2E/lr-schedule.test compares it with
/// transformers' schedulers).
TEST(LrSchedule, WarmsUpThenDecaysAndHoldsTheFloor) {
  LrSchedule constant{LrSchedule::Kind::Constant, 4, 0, 0.0};
  EXPECT_TRUE(constant.active());
  EXPECT_DOUBLE_EQ(constant.at(2.0, 1), 0.5);
  EXPECT_DOUBLE_EQ(constant.at(2.0, 3), 1.5);
  EXPECT_DOUBLE_EQ(constant.at(2.0, 4), 2.0);
  EXPECT_DOUBLE_EQ(constant.at(2.0, 1000), 2.0);
  EXPECT_FALSE(LrSchedule{}.active());
  EXPECT_DOUBLE_EQ(LrSchedule{}.at(2.0, 1), 2.0);

  LrSchedule linear{LrSchedule::Kind::Linear, 2, 6, 0.1};
  EXPECT_DOUBLE_EQ(linear.at(1.0, 1), 0.5);
  EXPECT_DOUBLE_EQ(linear.at(1.0, 2), 1.0);
  EXPECT_DOUBLE_EQ(linear.at(1.0, 4), 0.55); // halfway: 0.1 + 0.9 / 2
  EXPECT_DOUBLE_EQ(linear.at(1.0, 6), 0.1);
  EXPECT_DOUBLE_EQ(linear.at(1.0, 9), 0.1); // held past the horizon

  LrSchedule cosine{LrSchedule::Kind::Cosine, 0, 5, 0.0};
  EXPECT_DOUBLE_EQ(cosine.at(1.0, 1), 0.5 * (1 + std::cos(M_PI / 5)));
  EXPECT_NEAR(cosine.at(1.0, 5), 0.0, 1e-15);
  EXPECT_NEAR(cosine.at(1.0, 7), 0.0, 1e-15);
  // A cosine falls slowly first, then fast: its first fifth drops less
  // than a line's.
  EXPECT_GT(cosine.at(1.0, 1), 1.0 - 1.0 / 5);

  EXPECT_EQ(LrSchedule::parse("cosine"), LrSchedule::Kind::Cosine);
  EXPECT_EQ(LrSchedule::parse("step"), std::nullopt);
}

/// setLearningRate reaches the update: an optimizer built at rate 1 and
/// set to 0.25 steps exactly as one built at 0.25.
TEST(LrSchedule, AdamStepsAtTheRateSet) {
  at::manual_seed(5);
  at::Tensor w0 = at::randn({32, 16}), grad = at::randn({32, 16}) * 1e-2;
  auto stepped = [&](double built, std::optional<double> set) {
    AdamSettings s;
    s.lr = built;
    Adam opt(s);
    if (set)
      opt.setLearningRate(*set);
    ParamMap params{{"w", w0.clone()}};
    opt.step(params, {{"w", grad.clone()}});
    return params["w"];
  };
  at::Tensor want = stepped(0.25, std::nullopt);
  EXPECT_TRUE(at::equal(stepped(1.0, 0.25), want));
  EXPECT_FALSE(at::equal(stepped(1.0, std::nullopt), want));
}

} // namespace
