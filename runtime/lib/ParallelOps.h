//===- ParallelOps.h - differentiable collectives of the model --*- C++ -*-===//
//
// The collectives LlamaModel runs inside its forward pass, as autograd
// functions so that backward through a sharded model gives the sharded
// gradients: Megatron-LM's f and g operators for tensor parallelism, a
// gather along one dimension (vocabulary under tp, sequence under sp), and
// DeepSpeed-Ulysses' all-to-alls between a chunk of positions with all heads
// and all positions with a share of the heads.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_PARALLELOPS_H
#define RLHF_RUNTIME_PARALLELOPS_H

#include "rlhf/runtime/Communicator.h"

#include <ATen/core/Tensor.h>

#include <vector>

namespace rlhf::parallel {

/// Identity forward, all-reduce of the gradient backward: the input of a
/// column-parallel layer (Megatron's f).
at::Tensor copyToGroup(const at::Tensor &x, Communicator *c);

/// All-reduce forward, identity backward: the output of a row-parallel
/// layer (Megatron's g).
at::Tensor reduceFromGroup(const at::Tensor &x, Communicator *c);

/// Every rank's `x` concatenated along `dim` in rank order; backward keeps
/// this rank's slice of the gradient. For a result every rank then uses
/// alike (the same loss on every rank), so the gradient is not summed.
at::Tensor gatherDim(const at::Tensor &x, Communicator *c, int64_t dim);

/// Megatron-LM's sequence parallelism under tp (Korthikanti et al. 2022):
/// between a layer's collectives every tp rank holds 1/k of the token rows
/// of a pass, [B S / k, h]: the flattened [B, S] tokens cut into k
/// contiguous blocks (Megatron cuts the sequence of its [S, B, h] layout,
/// also contiguous). Norms, residual adds and the MLP's elementwise work
/// are per token, so which tokens a rank holds does not matter; the
/// collectives then move whole blocks, with no transposes. gatherSeq: `x`
/// [n, h] to every rank's rows in rank order [k n, h] (an all-gather), the
/// gradient reduce-scattered back (each rank used the whole for its own
/// shard of the weights). scatterSeq: partial sums `x` [..., h] to this
/// rank's block of rows of their sum, [T/k, h] (a reduce-scatter), the
/// gradient all-gathered back into x's shape. Together they move what
/// Megatron's f and g move.
at::Tensor gatherSeq(const at::Tensor &x, Communicator *c);
at::Tensor scatterSeq(const at::Tensor &x, Communicator *c);

/// The column-parallel projections `linear(gatherSeq(x), ws[i], bs[i])` of
/// one block of rows `x` [n, h], keeping only `x` for backward, which
/// gathers it again for the weights' gradients: the whole pass is never
/// held between forward and backward (Megatron's sequence-parallel linear).
/// `bs` holds an undefined tensor where a projection has no bias.
std::vector<at::Tensor> gatheredLinears(const at::Tensor &x,
                                        const std::vector<at::Tensor> &ws,
                                        const std::vector<at::Tensor> &bs,
                                        Communicator *c);

/// Ulysses: [B, S/k, H, D] (this rank's chunk of positions, all heads) to
/// [B, S, H/k, D] (all positions, this rank's k-th of the heads, in rank
/// order) over the k ranks of `c`. H must be a multiple of k.
at::Tensor seqToHeads(const at::Tensor &x, Communicator *c);

/// Its inverse: [B, S, H/k, D] back to [B, S/k, H, D].
at::Tensor headsToSeq(const at::Tensor &x, Communicator *c);

/// The attention inputs of a chunk, [B, heads, S/k, D] each, to
/// [B, heads/k, S, D] by seqToHeads. KV heads that are not a multiple of k
/// are first repeated up to one (rejecting instead would rule out GQA models
/// with few KV heads); their head groups still match the query heads'.
void ulyssesToHeads(at::Tensor &q, at::Tensor &k, at::Tensor &v,
                    Communicator *c);

} // namespace rlhf::parallel

#endif // RLHF_RUNTIME_PARALLELOPS_H
