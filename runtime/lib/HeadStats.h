//===- HeadStats.h - token log-probs without [N, vocab] logits --*- C++ -*-===//
//
// The lm head and the per-token statistics a loss needs from it (the
// log-probability of the next token, the entropy of the distribution), fused
// over chunks of positions as Liger's and verl's fused linear cross-entropy
// are: forward keeps one log-sum-exp per position, backward recomputes each
// chunk's logits. No tensor of all positions by the whole vocabulary is ever
// held, in training or inference; the cost model prices the chunk
// (LogitChunks.h). Under tensor parallelism the weight
// is this rank's vocabulary shard and the statistics are Megatron's
// vocabulary-parallel cross-entropy, chunk by chunk: the global max and sum
// of exponentials by collectives, the target's logit from its owner's
// shard, and a backward without collectives.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_HEADSTATS_H
#define RLHF_RUNTIME_HEADSTATS_H

#include "rlhf/runtime/LogitChunks.h"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace rlhf {

class Communicator;

/// Positions per chunk for a vocabulary (shard) of `vocab` columns (at
/// least one): of `chunkBytes` fp32 logits, logitChunkBytes(vocab) where 0.
int64_t logitRowsPerChunk(int64_t vocab, int64_t chunkBytes = 0);

/// For hidden states `x` [N, h] (after the final norm), the head's weight
/// `w` [V, h] and next-token ids `next` [N]: a [N, k] fp32 tensor whose
/// columns are, in this order, the log-probability of `next` (with
/// `logprobs`) and the entropy (with `entropy`). Differentiable in `x` and
/// `w`; the weight's gradient is summed over chunks in fp32. With `tp`, `w`
/// is this rank's rows [offset, offset + V/k) of the vocabulary, `next`
/// holds global ids, and every rank gets the same statistics; `x`'s
/// gradient is this shard's part (pass `x` through parallel::copyToGroup).
/// `scale` multiplies the logits first: 1/T gives the statistics of the
/// distribution that sampling at temperature T draws from. Without
/// `entropyGrad` the entropy is a metric: backward takes no gradient
/// through it (three passes over each chunk's logits fewer).
at::Tensor fusedHeadStats(const at::Tensor &x, const at::Tensor &w,
                          const at::Tensor &next, bool logprobs, bool entropy,
                          Communicator *tp = nullptr, int64_t offset = 0,
                          int64_t chunkBytes = 0, double scale = 1.0,
                          bool entropyGrad = true);

} // namespace rlhf

#endif // RLHF_RUNTIME_HEADSTATS_H
