//===- HostComputeTest.cpp - the oracles and exact_match, by hand ---------===//
//
// The C++ estimators that FnBuiltinsTest holds the stdlib's functions to
// (BuiltinOracle.h), checked on values worked out by hand, and the
// runtime's exact_match.
//
//===----------------------------------------------------------------------===//

#include "BuiltinOracle.h"

#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/HostCompute.h"

#include <gtest/gtest.h>

using namespace rlhf;
using namespace rlhf::oracle;

namespace {

// gamma = lam = 1, no KL, zero values: every generated token's advantage is
// the score (before whitening), so whitened advantages are equal within a
// row and ordered like the scores across rows.
TEST(HostCompute, GaeWithoutCriticIsTheScore) {
  at::Tensor mask =
      at::tensor({0, 1, 1, 1, 0, 0, 1, 1}, at::kLong).view({2, 4});
  at::Tensor score = at::tensor({1.0f, 3.0f});
  at::Tensor zeros = at::zeros({2, 4});
  oracle::GaeResult r =
      oracle::gae(score, zeros, zeros, zeros, mask, 1.0, 1.0, 0.0);
  EXPECT_EQ(r.advantages[0][0].item<float>(), 0.0f); // outside the mask
  EXPECT_NEAR(r.advantages[0][1].item<float>(),
              r.advantages[0][3].item<float>(), 1e-6);
  EXPECT_LT(r.advantages[0][1].item<float>(), r.advantages[1][2].item<float>());
  EXPECT_NEAR(r.returns[1][2].item<float>(), 3.0f, 1e-6);
}

// One step by hand: T = 2 generated tokens, gamma 0.9, lam 0.5.
TEST(HostCompute, GaeRecursionByHand) {
  at::Tensor mask = at::ones({1, 2}, at::kLong);
  at::Tensor values = at::tensor({0.5f, 0.2f}).view({1, 2});
  at::Tensor zeros = at::zeros({1, 2});
  oracle::GaeResult r = oracle::gae(at::tensor({1.0f}), values, zeros, zeros,
                                    mask, 0.9, 0.5, 0.0);
  // delta1 = 1 - 0.2 = 0.8; delta0 = 0 + 0.9*0.2 - 0.5 = -0.32;
  // A1 = 0.8, A0 = -0.32 + 0.45*0.8 = 0.04; returns = A + V.
  EXPECT_NEAR(r.returns[0][0].item<float>(), 0.54f, 1e-5);
  EXPECT_NEAR(r.returns[0][1].item<float>(), 1.0f, 1e-5);
}

TEST(HostCompute, GroupEstimators) {
  at::Tensor s = at::tensor({1.0f, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f});
  at::Tensor g = oracle::grpoAdvantages(s, 3);
  EXPECT_GT(g[0].item<float>(), 0);
  EXPECT_LT(g[1].item<float>(), 0);
  EXPECT_NEAR(g.view({2, 3}).sum(1).abs().max().item<float>(), 0, 1e-5);
  at::Tensor r = oracle::rlooAdvantages(s, 3);
  EXPECT_NEAR(r[0].item<float>(), 1.0f, 1e-6);  // 1 - mean(0, 0)
  EXPECT_NEAR(r[3].item<float>(), -1.0f, 1e-6); // 0 - mean(1, 1)
  EXPECT_THROW(oracle::grpoAdvantages(s, 4), Error);
  EXPECT_TRUE(at::equal(oracle::remaxAdvantages(s, s), at::zeros({6})));
}

TEST(HostCompute, KlPenaltyAndExactMatch) {
  at::Tensor mask = at::tensor({0, 1, 1}, at::kLong).view({1, 3});
  at::Tensor lp = at::tensor({-1.0f, -1.0f, -2.0f}).view({1, 3});
  at::Tensor ref = at::tensor({-3.0f, -2.0f, -2.0f}).view({1, 3});
  EXPECT_NEAR(oracle::klPenalty(at::tensor({1.0f}), lp, ref, mask, 0.5)[0]
                  .item<float>(),
              0.5f, 1e-6);
  // Six samples of one prompt whose answer is [7, 8]; pad 0, eos 2. The
  // response ends at its eos or at the end of the generation; one that only
  // starts with the answer, or stops short of it, does not match.
  at::Tensor seq = at::tensor({5, 7, 8, 0, 0, //
                               5, 7, 9, 0, 0, //
                               5, 7, 8, 2, 0, //
                               5, 7, 8, 8, 2, //
                               5, 7, 2, 0, 0, //
                               5, 7, 8, 2, 8},
                              at::kLong)
                       .view({6, 5});
  at::Tensor gmask = at::tensor({0, 1, 1, 0, 0, //
                                 0, 1, 1, 0, 0, //
                                 0, 1, 1, 1, 0, //
                                 0, 1, 1, 1, 1, //
                                 0, 1, 1, 0, 0, //
                                 0, 1, 1, 1, 1},
                                at::kLong)
                         .view({6, 5});
  at::Tensor answer = at::tensor({7, 8}, at::kLong).view({1, 2});
  std::vector<std::string> predictions;
  at::Tensor m = exactMatch(seq, gmask, answer, 0, 2, &predictions);
  EXPECT_TRUE(at::equal(m, at::tensor({1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 1.0f})))
      << m;
  // What each sequence was scored for: its generated tokens to the eos.
  ASSERT_EQ(predictions.size(), 6u);
  EXPECT_EQ(predictions[0], "7,8");
  EXPECT_EQ(predictions[2], "7,8");
}

// maj@k scores each prompt by its most frequent prediction: right even
// where a sample's is not, wrong even where one sample is right (best@k
// would count it), and on a tie the prediction that reached the count
// first.
TEST(HostCompute, MajorityVote) {
  at::Tensor scores = at::tensor({1.0, 1.0, 0.0, 1.0, // 4 4 5 4: right
                                  0.0, 0.0, 1.0, 0.0, // 5 5 4 6: wrong
                                  0.0, 1.0, 1.0, 0.0, // 5 4 4 5: 4 first
                                  0.0, 0.0, 0.0, 0.0})
                          .view({4, 4});
  std::vector<std::string> predictions = {"4", "4", "5", "4", //
                                          "5", "5", "4", "6", //
                                          "5", "4", "4", "5", //
                                          "1", "2", "3", "5"};
  at::Tensor v = majorityVote(scores, predictions);
  EXPECT_TRUE(at::equal(v, at::tensor({1.0, 0.0, 1.0, 0.0}, at::kDouble))) << v;
  predictions.pop_back();
  EXPECT_THROW(majorityVote(scores, predictions), Error);
}

} // namespace
