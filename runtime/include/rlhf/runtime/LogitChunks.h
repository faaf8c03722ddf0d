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

#include <cstdint>

namespace rlhf {

/// fp32 logits per chunk of positions: 64 MiB.
constexpr int64_t kLogitChunkBytes = int64_t(64) << 20;

/// fp32 logits per chunk of rows that generation's sampler takes at a time
/// (runtime/lib/Sampling.h): its sort and fp64 CDF hold several copies.
constexpr int64_t kSampleChunkBytes = int64_t(16) << 20;

} // namespace rlhf

#endif // RLHF_RUNTIME_LOGITCHUNKS_H
