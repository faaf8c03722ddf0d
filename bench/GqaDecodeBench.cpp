//===- GqaDecodeBench.cpp - a decode step's attention over grouped KV heads
//===//
//
// `rlhf-bench-gqa-decode [--cpu]`: one decode step's attention (one query
// position under the key mask of left-padded prompts) at LLaMA-3 8B's head
// shapes (32 query heads over 8 KV heads of 128), through the runtime's
// rlhf::attention both ways side by side: GroupedKv::Shared (the default:
// each KV head's group of query heads folded into query rows) and
// GroupedKv::Repeated (KV heads copied per query head first, as before).
// bf16 on a GPU (the default where one is visible), fp32 on the CPU. Each
// row also checks that both give the same output. The last line is the
// headline: `shared/repeated GQA decode attention speedup: X.XXx`.
//
//===----------------------------------------------------------------------===//

#include "RuntimeBench.h"

#include "rlhf/runtime/Attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

using namespace rlhf;

int main(int argc, char **argv) {
  std::optional<c10::Device> chosen =
      bench::deviceFromArgs(argc, argv, "rlhf-bench-gqa-decode");
  if (!chosen)
    return 2;
  const c10::Device device = *chosen;
  const bool gpu = device.is_cuda();
  const auto opts = at::TensorOptions().device(device).dtype(gpu ? at::kBFloat16
                                                                 : at::kFloat);
  const int64_t heads = 32, kvHeads = 8, headDim = 128;
  const int reps = gpu ? 50 : 3;
  std::printf("decode-step attention, %lld query heads over %lld KV heads of "
              "%lld, on %s (%s), mean of %d\n",
              (long long)heads, (long long)kvHeads, (long long)headDim,
              gpu ? "cuda:0" : "the CPU", gpu ? "bf16" : "fp32", reps);
  std::printf("%6s %8s %14s %12s %9s %12s\n", "batch", "cached", "repeated ms",
              "shared ms", "speedup", "max |diff|");
  std::vector<std::pair<int64_t, int64_t>> points{{1, 1024}, {16, 1024}};
  if (gpu)
    points.insert(points.end(), {{64, 1024}, {16, 4096}, {64, 4096}});
  double logSum = 0;
  for (auto [batch, cached] : points) {
    at::manual_seed(3);
    at::Tensor q = at::randn({batch, heads, 1, headDim}, opts);
    at::Tensor k = at::randn({batch, kvHeads, cached, headDim}, opts);
    at::Tensor v = at::randn({batch, kvHeads, cached, headDim}, opts);
    // Left padding: row b's first 7 b mod 100 positions are masked.
    at::Tensor pad =
        at::arange(cached, opts.dtype(at::kLong)).unsqueeze(0) <
        (at::arange(batch, opts.dtype(at::kLong)) * 7 % 100).unsqueeze(1);
    at::Tensor mask =
        at::zeros({batch, cached}, opts)
            .masked_fill(pad, -std::numeric_limits<float>::infinity())
            .view({batch, 1, 1, cached});
    auto time = [&](GroupedKv g) {
      attention(q, k, v, mask, g);
      return bench::meanSeconds(device, reps,
                                [&] { attention(q, k, v, mask, g); });
    };
    const double repeated = time(GroupedKv::Repeated);
    const double shared = time(GroupedKv::Shared);
    const double diff =
        (attention(q, k, v, mask, GroupedKv::Repeated).to(at::kFloat) -
         attention(q, k, v, mask).to(at::kFloat))
            .abs()
            .max()
            .item<double>();
    std::printf("%6lld %8lld %14.3f %12.3f %8.2fx %12.3g\n", (long long)batch,
                (long long)cached, repeated * 1e3, shared * 1e3,
                repeated / shared, diff);
    std::fflush(stdout);
    logSum += std::log(repeated / shared);
  }
  std::printf("shared/repeated GQA decode attention speedup: %.2fx\n",
              std::exp(logSum / double(points.size())));
  return 0;
}
