//===- SamplingTest.cpp - generation's sampler over chunks of rows --------===//

#include "Sampling.h"
#include "rlhf/runtime/Device.h"

#include <gtest/gtest.h>

#include <torch/torch.h>

using namespace rlhf;

namespace {

GenerateOptions sampling(bool greedy, double topP) {
  GenerateOptions o;
  o.greedy = greedy;
  o.topP = topP;
  o.temperature = 0.7;
  return o;
}

// Rows sampled in chunks get the tokens and log-probs of one pass, greedy,
// with top-p and without, the last chunk ragged.
TEST(Sampling, ChunksOfRowsMatchOnePass) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const int64_t B = 37, V = 1000;
  at::Tensor logits = at::randn({B, V}, gen) * 3;
  at::Tensor u = at::rand({B}, gen, at::kDouble);
  for (auto [greedy, topP] :
       {std::pair{true, 1.0}, std::pair{false, 1.0}, std::pair{false, 0.9}}) {
    GenerateOptions o = sampling(greedy, topP);
    at::Tensor uu = greedy ? at::Tensor() : u;
    auto [whole, wholeLp] = sampleTokens(logits, uu, o, int64_t(1) << 30);
    auto [chunked, chunkedLp] = sampleTokens(logits, uu, o, 8 * V * 4);
    EXPECT_TRUE(at::equal(whole, chunked)) << "greedy " << greedy;
    EXPECT_TRUE(at::equal(wholeLp, chunkedLp)) << "greedy " << greedy;
    EXPECT_EQ(whole.sizes(), (std::vector<int64_t>{B}));
  }
  // Top-p keeps the most likely tokens: with a tiny p only the argmax, and
  // with p = 0 too (it once dropped every token and sampled id 0).
  for (double p : {1e-6, 0.0}) {
    auto [top, lp] = sampleTokens(logits, u, sampling(false, p));
    EXPECT_TRUE(at::equal(top, logits.argmax(-1))) << "top_p " << p;
  }
}

// 512 rows of a 32000-word vocabulary (62.5 MiB of fp32 logits): sampled in
// one pass the sort and the fp64 CDF hold several copies of them; over
// chunks of rows a bounded number of chunks, whatever the batch.
TEST(Sampling, PeakIsChunksNotTheWholeBatch) {
  trackHostAllocations();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const int64_t B = 512, V = 32000;
  at::Tensor logits = at::randn({B, V}, gen);
  at::Tensor u = at::rand({B}, gen, at::kDouble);
  const double whole = double(B) * V * 4;
  auto peakOf = [&](int64_t chunkBytes, bool greedy) {
    resetPeakBytes(c10::kCPU);
    const double before = deviceCurrentBytes(c10::kCPU);
    sampleTokens(logits, greedy ? at::Tensor() : u, sampling(greedy, 0.9),
                 chunkBytes);
    return devicePeakBytes(c10::kCPU) - before;
  };
  const double chunk = double(kSampleChunkBytes);
  const double onePass = peakOf(int64_t(1) << 40, false);
  const double chunked = peakOf(kSampleChunkBytes, false);
  const double greedy = peakOf(kSampleChunkBytes, true);
  std::printf("top-p: one pass %.2f x the logits, chunked %.2f x a chunk; "
              "greedy, chunked: %.2f x a chunk\n",
              onePass / whole, chunked / chunk, greedy / chunk);
  EXPECT_GT(onePass, 6 * whole);
  // What the cost model prices (kSampleChunks, kGreedyChunks), within 10%.
  EXPECT_NEAR(chunked / chunk, 7.2, 0.72);
  EXPECT_NEAR(greedy / chunk, 1.0, 0.1);
}

} // namespace
