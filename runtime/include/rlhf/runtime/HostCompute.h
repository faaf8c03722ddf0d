//===- HostCompute.h - advantages and rewards on the controller -*- C++ -*-===//
//
// The host functions of the rlhf dialect (rlhf.compute kinds), on gathered
// batches. Per-token tensors are aligned with predicted tokens ([N, S-1],
// index t predicts token t+1) and `mask` marks generated tokens; per-sequence
// scores are [N]. Groups are consecutive rows (n samples per prompt).
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_HOSTCOMPUTE_H
#define RLHF_RUNTIME_HOSTCOMPUTE_H

#include <ATen/ATen.h>

namespace rlhf {

struct GaeResult {
  at::Tensor advantages, returns; ///< [N, S-1], zero outside the mask
};

/// PPO: the sequence score lands on its last generated token, every token
/// pays `kl` times (logprob - ref logprob), and generalized advantage
/// estimation runs backwards over the generated tokens with the critic's
/// `values` (aligned like logprobs). Advantages are whitened over the mask.
GaeResult gae(const at::Tensor &score, const at::Tensor &values,
              const at::Tensor &logprobs, const at::Tensor &refLogprobs,
              const at::Tensor &mask, double gamma, double lam, double kl);

/// GRPO: each score minus its group's mean, over the group's std (+1e-6).
at::Tensor grpoAdvantages(const at::Tensor &score, int64_t group);

/// RLOO: each score minus the mean of the other samples of its group.
at::Tensor rlooAdvantages(const at::Tensor &score, int64_t group);

/// ReMax: score minus the greedy baseline's score.
at::Tensor remaxAdvantages(const at::Tensor &score, const at::Tensor &baseline);

/// Score minus `coef` times the sequence's summed (logprob - ref logprob).
at::Tensor klPenalty(const at::Tensor &score, const at::Tensor &logprobs,
                     const at::Tensor &refLogprobs, const at::Tensor &mask, double coef);

/// 1 where the generated tokens of a sequence (its masked part, up to the
/// answer's length and ignoring trailing `pad`) equal the answer's tokens.
/// `answer` rows repeat for the n samples of each prompt.
at::Tensor exactMatch(const at::Tensor &seq, const at::Tensor &mask,
                      const at::Tensor &answer, int64_t pad);

} // namespace rlhf

#endif // RLHF_RUNTIME_HOSTCOMPUTE_H
