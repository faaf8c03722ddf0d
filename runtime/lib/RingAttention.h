//===- RingAttention.h - causal attention over a ring of ranks --*- C++ -*-===//
//
// The ring half of unified sequence parallelism (USP, arXiv 2405.07719):
// ring rank i holds the queries, keys and values of position chunk i of
// every sequence; the key/value blocks travel once around the ring and each
// rank folds its queries' attention over every block into an online
// softmax (running output and log-sum-exp). Backward circulates the blocks
// again, recomputes each block's probabilities from the saved log-sum-exp
// and carries the blocks' key/value gradients along to their owners.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_RINGATTENTION_H
#define RLHF_RUNTIME_RINGATTENTION_H

#include "rlhf/runtime/Communicator.h"

#include <ATen/core/Tensor.h>

namespace rlhf::parallel {

/// Causal scaled dot-product attention of this ring rank's queries
/// q [B, H, n, D] (positions [rank n, (rank + 1) n) of the sequence) over
/// the keys and values k, v [B, Hkv, n, D] of every rank's chunk, in the
/// ring's rank order. H must be a multiple of Hkv (GQA: query head h reads
/// KV head h / (H / Hkv), as repeat_interleave pairs them). Returns
/// [B, H, n, D] in q's dtype; softmax and accumulation run in fp32. An
/// autograd function: backward runs the ring backward, so every rank gets
/// the gradients of its own q, k and v.
at::Tensor ringAttention(const at::Tensor &q, const at::Tensor &k,
                         const at::Tensor &v, Communicator *ring);

} // namespace rlhf::parallel

#endif // RLHF_RUNTIME_RINGATTENTION_H
