//===- LogitChunks.h - the lm head's chunk of logits ------------*- C++ -*-===//
//
// The runtime computes the lm head fused with the statistics losses read of
// it, over chunks of positions (runtime/lib/HeadStats.cpp), and samples
// generated tokens over chunks of rows (runtime/lib/Sampling.cpp); the cost
// model prices the same chunks. Torch-free, so both include it.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_LOGITCHUNKS_H
#define RLHF_RUNTIME_LOGITCHUNKS_H

#include <algorithm>
#include <cstdint>

namespace rlhf {

/// fp32 logits per chunk of positions: 64 MiB, or more for a wide
/// vocabulary (logitChunkBytes).
constexpr int64_t kLogitChunkBytes = int64_t(64) << 20;

/// Positions per chunk at least. Backward adds each chunk's weight gradient
/// into an fp32 sum, about 12 bytes per weight of the head per chunk, beside
/// the chunk's three GEMMs of 2 x rows FLOPs per weight each: on an H100
/// (~550 TFLOP/s bf16, ~2.8 TB/s) fewer than about 1000 rows spend longer
/// in that sum than in the GEMMs (64 MiB is 524 rows of LLaMA-2's
/// vocabulary, 130 of LLaMA-3's).
constexpr int64_t kLogitChunkMinRows = 1024;

/// The fp32 bytes of one chunk of logits over `width` vocabulary columns
/// (a tp rank's shard).
constexpr int64_t logitChunkBytes(int64_t width) {
  return std::max(kLogitChunkBytes,
                  kLogitChunkMinRows * 4 * std::max<int64_t>(1, width));
}

/// fp32 logits per chunk of rows that generation's sampler takes at a time
/// (runtime/lib/Sampling.h): its sort and fp64 CDF hold several copies.
constexpr int64_t kSampleChunkBytes = int64_t(16) << 20;

} // namespace rlhf

#endif // RLHF_RUNTIME_LOGITCHUNKS_H
