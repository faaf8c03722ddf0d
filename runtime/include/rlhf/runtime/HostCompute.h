//===- HostCompute.h - host functions written in C++ -----------*- C++ -*-===//
//
// The host functions of the rlhf dialect that the language cannot express
// (rlhf.compute kinds other than `fn`, whose bodies FnProgram.h runs), on
// gathered batches. Per-token tensors are aligned with predicted tokens
// ([N, S-1], index t predicts token t+1) and `mask` marks generated tokens.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_HOSTCOMPUTE_H
#define RLHF_RUNTIME_HOSTCOMPUTE_H

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace rlhf {

/// Row `r`'s generated tokens as exact_match compares them: where `mask` is
/// set, `pad` left out, up to the first `eos`. `tokens` [N, S-1] are the
/// sequences' predicted tokens (each sequence's tokens after its first), and
/// `mask` marks the generated ones among them.
std::vector<int64_t>
generatedTokens(const at::TensorAccessor<int64_t, 2> &tokens,
                const at::TensorAccessor<int64_t, 2> &mask, int64_t r,
                int64_t pad, int64_t eos);

/// 1 where the generated tokens of a sequence (its masked part up to its
/// first `eos`, `pad` left out) equal the answer's tokens, no more and no
/// fewer: "44" does not answer "4". `answer` rows repeat for the n samples
/// of each prompt.
/// With `predictions`, each sequence's generated tokens as compared (ids
/// joined by ','), for majority voting.
at::Tensor exactMatch(const at::Tensor &seq, const at::Tensor &mask,
                      const at::Tensor &answer, int64_t pad, int64_t eos,
                      std::vector<std::string> *predictions = nullptr);

/// maj@k: per prompt, the score of its samples' most frequent prediction
/// (the first of them to reach the count on a tie), as verl reports it.
/// `scores` is [prompts, k], prompt-major; `predictions` its rows' answers
/// in the same order.
at::Tensor majorityVote(const at::Tensor &scores,
                        const std::vector<std::string> &predictions);

} // namespace rlhf

#endif // RLHF_RUNTIME_HOSTCOMPUTE_H
