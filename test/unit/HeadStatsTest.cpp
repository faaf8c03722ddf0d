//===- HeadStatsTest.cpp - the fused lm head against log_softmax ----------===//
//
// fusedHeadStats against the plain formulation it replaces (linear, fp32
// log_softmax, gather; entropy from the same log-probabilities): values and
// gradients over several chunks, including a ragged last one, in fp32 and
// bf16, and at a sampling temperature; and the memory it saves, counted by
// the CPU allocator.
//
//===----------------------------------------------------------------------===//

#include "HeadStats.h"

#include "rlhf/runtime/Device.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>

using namespace rlhf;

namespace {

struct Inputs {
  at::Tensor x, w, next;
};

Inputs inputs(int64_t n, int64_t h, int64_t v, at::ScalarType dtype) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(23);
  Inputs in;
  in.x = at::randn({n, h}, gen, at::TensorOptions().dtype(at::kFloat))
             .to(dtype)
             .requires_grad_(true);
  in.w = (at::randn({v, h}, gen, at::TensorOptions().dtype(at::kFloat)) * 0.3)
             .to(dtype)
             .requires_grad_(true);
  in.next = at::randint(0, v, {n}, gen, at::TensorOptions().dtype(at::kLong));
  return in;
}

/// [N, k] as fusedHeadStats returns it, through the unfused ops.
at::Tensor plain(const Inputs &in, bool logprobs, bool entropy,
                 double temperature = 1.0) {
  at::Tensor lp =
      at::log_softmax(at::linear(in.x, in.w).to(at::kFloat) / temperature, -1);
  std::vector<at::Tensor> cols;
  if (logprobs)
    cols.push_back(lp.gather(1, in.next.unsqueeze(1)).squeeze(1));
  if (entropy)
    cols.push_back(-(lp.exp() * lp).sum(-1));
  return at::stack(cols, 1);
}

/// Values and the gradients of a weighted sum of them, fused and plain.
void compare(at::ScalarType dtype, bool logprobs, bool entropy, double tol,
             double temperature = 1.0) {
  const int64_t n = 37, h = 16, v = 50;
  Inputs a = inputs(n, h, v, dtype), b = inputs(n, h, v, dtype);
  // 8 rows of 50 fp32 logits per chunk: five chunks, the last of 5 rows.
  const int64_t chunkBytes = 8 * 50 * 4;
  ASSERT_EQ(logitRowsPerChunk(v, chunkBytes), 8);
  at::Tensor fused = fusedHeadStats(a.x, a.w, a.next, logprobs, entropy,
                                    nullptr, 0, chunkBytes, 1.0 / temperature);
  at::Tensor ref = plain(b, logprobs, entropy, temperature);
  if (temperature != 1.0) // the scale does change the statistics
    EXPECT_FALSE(at::allclose(fused, plain(b, logprobs, entropy), tol, tol));
  ASSERT_EQ(fused.sizes(), ref.sizes());
  EXPECT_EQ(fused.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::allclose(fused, ref, tol, tol))
      << (fused - ref).abs().max().item<double>();
  at::Tensor weights = at::linspace(-1, 2, fused.numel()).view(fused.sizes());
  (fused * weights).sum().backward();
  (ref * weights).sum().backward();
  for (auto [f, r, what] : {std::tuple{a.x.grad(), b.x.grad(), "x"},
                            std::tuple{a.w.grad(), b.w.grad(), "w"}}) {
    ASSERT_TRUE(f.defined()) << what;
    EXPECT_EQ(f.scalar_type(), dtype) << what;
    double scale = r.to(at::kFloat).abs().max().item<double>();
    double diff =
        (f.to(at::kFloat) - r.to(at::kFloat)).abs().max().item<double>();
    EXPECT_GT(scale, 0.0) << what;
    EXPECT_LE(diff, tol * scale) << what << " gradient, scale " << scale;
  }
}

} // namespace

TEST(HeadStats, LogprobsMatchLogSoftmaxFp32) {
  compare(at::kFloat, true, false, 1e-5);
}
TEST(HeadStats, EntropyMatchesFp32) { compare(at::kFloat, false, true, 1e-5); }
TEST(HeadStats, BothMatchFp32) { compare(at::kFloat, true, true, 1e-5); }
// bf16 GEMMs: the fused weight gradient sums chunks in fp32, the plain one in
// one bf16 GEMM, so they agree to bf16's precision.
TEST(HeadStats, BothMatchBf16) { compare(at::kBFloat16, true, true, 2e-2); }
// Sampling at temperature T records log-probs of logits / T; the loss's and
// the reference's statistics take the same scale, values and gradients.
TEST(HeadStats, TemperatureScalesTheLogits) {
  compare(at::kFloat, true, true, 1e-5, 0.3);
  compare(at::kFloat, true, true, 1e-5, 2.5);
}

// An entropy asked for as a metric (entropyGrad false) has the same value,
// and the gradients are those of the log-probs alone, bit for bit, whatever
// weight the entropy column gets.
TEST(HeadStats, MetricEntropyTakesNoGradient) {
  const int64_t chunkBytes = 8 * 50 * 4;
  Inputs both = inputs(37, 16, 50, at::kFloat),
         alone = inputs(37, 16, 50, at::kFloat);
  at::Tensor s = fusedHeadStats(both.x, both.w, both.next, true, true, nullptr,
                                0, chunkBytes, 1.0, /*entropyGrad=*/false);
  at::Tensor lp = fusedHeadStats(alone.x, alone.w, alone.next, true, false,
                                 nullptr, 0, chunkBytes);
  EXPECT_TRUE(at::equal(s.select(1, 0), lp.select(1, 0)));
  EXPECT_TRUE(at::allclose(s.select(1, 1),
                           plain(alone, false, true).select(1, 0), 1e-5, 1e-5));
  at::Tensor weights = at::linspace(-1, 2, 37);
  (s.select(1, 0) * weights + s.select(1, 1) * 3).sum().backward();
  (lp.select(1, 0) * weights).sum().backward();
  EXPECT_TRUE(at::equal(both.x.grad(), alone.x.grad()));
  EXPECT_TRUE(at::equal(both.w.grad(), alone.w.grad()));
}

// A frozen head (the reference model's, a LoRA run's) gets no gradient and
// the hidden states still do.
TEST(HeadStats, FrozenWeightGetsNoGradient) {
  Inputs in = inputs(9, 8, 20, at::kFloat);
  in.w = in.w.detach();
  fusedHeadStats(in.x, in.w, in.next, true, false, nullptr, 0, 4 * 20 * 4)
      .sum()
      .backward();
  EXPECT_TRUE(in.x.grad().defined());
  EXPECT_FALSE(in.w.grad().defined());
}

// Forward and backward over 4096 positions of a 4000-word vocabulary hold
// no [N, V] tensor: the peak stays a few chunks above the inputs, where the
// plain formulation holds several 62.5 MiB copies of the logits.
TEST(HeadStats, PeakIsChunksNotTheWholeLogits) {
  trackHostAllocations();
  const int64_t n = 4096, h = 64, v = 4000;
  const double full = double(n) * v * 4, chunk = 1 << 20;
  auto peakOf = [&](auto &&run) {
    Inputs in = inputs(n, h, v, at::kFloat);
    resetPeakBytes(c10::kCPU);
    const double before = deviceCurrentBytes(c10::kCPU);
    run(in).sum().backward();
    return devicePeakBytes(c10::kCPU) - before;
  };
  const double fused = peakOf([&](const Inputs &in) {
    return fusedHeadStats(in.x, in.w, in.next, true, true, nullptr, 0,
                          int64_t(chunk));
  });
  const double unfused =
      peakOf([&](const Inputs &in) { return plain(in, true, true); });
  // Gradients of x and w (1 MiB each) and five chunks' temporaries.
  EXPECT_LT(fused, 8 * chunk) << "fused peak " << fused / chunk << " MiB";
  EXPECT_GT(unfused, 2 * full) << "plain peak " << unfused / chunk << " MiB";
}
