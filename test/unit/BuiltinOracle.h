//===- BuiltinOracle.h - the C++ estimators and losses, as oracles *- C++
//-*-===//
//
// The advantage estimators and losses rlhfc once built in, kept here as the
// oracles that the stdlib's .rlhf functions (stdlib/algorithms/) are tested
// against: FnBuiltinsTest.cpp compares values and gradients on random
// inputs, HostComputeTest.cpp checks these by hand. The runtime no longer
// has them. Per-token tensors are aligned with predicted tokens ([N, S-1],
// index t predicts token t+1) and `mask` marks generated tokens; groups are
// consecutive rows (n samples per prompt).
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_TEST_UNIT_BUILTINORACLE_H
#define RLHF_TEST_UNIT_BUILTINORACLE_H

#include "rlhf/runtime/Model.h"
#include "rlhf/runtime/Train.h"

#include <ATen/ATen.h>

namespace rlhf::oracle {

struct GaeResult {
  at::Tensor advantages, returns; ///< [N, S-1], zero outside the mask
};

/// PPO: the score lands on each row's last generated token, every token
/// pays `kl` times (logprob - ref logprob), and generalized advantage
/// estimation runs backwards; advantages are whitened over the mask.
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
                     const at::Tensor &refLogprobs, const at::Tensor &mask,
                     double coef);

enum class Loss { Sft, PpoActor, PpoValue, Grpo, Dpo, Rm };

struct LossSettings {
  double clip = 0.2; ///< PPO ratio / value clip
  double kl = 0.0;   ///< GRPO's k3 KL coefficient
  double beta = 0.1; ///< DPO temperature
};

/// What each loss reads (the fields its comment names).
struct Batch {
  at::Tensor seq;          ///< [N, S] token ids (DPO/RM: chosen)
  at::Tensor lossMask;     ///< [N, S-1] 1 where a token is trained on
  at::Tensor oldLogprobs;  ///< PPO/GRPO: behaviour policy
  at::Tensor refLogprobs;  ///< GRPO: reference; DPO: reference of chosen
  at::Tensor advantages;   ///< [N, S-1] or [N], PPO/GRPO
  at::Tensor oldValues;    ///< value loss: values at rollout
  at::Tensor returns;      ///< value loss targets
  at::Tensor rejected;     ///< [N, S] DPO/RM
  at::Tensor rejectedMask; ///< [N, S-1]
  at::Tensor refRejected;  ///< DPO: reference of rejected
  Batch rows(int64_t lo, int64_t n) const;
};

/// The loss of `b` under `model`: per-token losses averaged over the
/// trained tokens, DPO and reward-model pair losses over the rows.
at::Tensor loss(LlamaModel &model, Loss k, const Batch &b,
                const LossSettings &s);

/// trainStep's arithmetic on one rank, in the simplest form: per minibatch,
/// the loss's gradient, clipped by its global norm, then Adam. Gradients
/// are left on the parameters.
TrainStats train(LlamaModel &model, Adam &opt, Loss k, const Batch &b,
                 const LossSettings &s, int64_t minibatches);

} // namespace rlhf::oracle

#endif // RLHF_TEST_UNIT_BUILTINORACLE_H
