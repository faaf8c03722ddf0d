//===- Sampling.h - the next token from the last logits ---------*- C++ -*-===//
//
// Generation's sampler: greedy, or top-p by inverse CDF at per-row uniforms
// (so that a row's sample depends on neither the batch split nor the
// layout). Sorting and the fp64 CDF hold about ten copies of the logits, so
// the rows run in chunks of at most rlhf::kSampleChunkBytes of fp32 logits
// (LogitChunks.h; the cost model prices the same chunk): every row's result
// is the one a single pass gives.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_SAMPLING_H
#define RLHF_RUNTIME_SAMPLING_H

#include "rlhf/runtime/LogitChunks.h"
#include "rlhf/runtime/Model.h"

#include <ATen/core/Tensor.h>

#include <utility>

namespace rlhf {

/// The next token [B] (int64) of every row of `logits` [B, V] (fp32) and
/// its log-probability [B] under the temperature-scaled distribution, with
/// uniforms `u` [B] in [0, 1) (undefined when `o.greedy`).
std::pair<at::Tensor, at::Tensor>
sampleTokens(const at::Tensor &logits, const at::Tensor &u,
             const GenerateOptions &o, int64_t chunkBytes = kSampleChunkBytes);

} // namespace rlhf

#endif // RLHF_RUNTIME_SAMPLING_H
