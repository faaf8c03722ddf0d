//===- LossBatches.h - random train batches for the stdlib losses -*- C++
//-*-===//
//
// The multi-process workers (ModelWorker.cpp, SeqParallelWorker.cpp) train
// a layout against one process on the same batch: the inputs of a stdlib
// loss drawn at random, and each data-parallel rank's rows of it.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_TEST_UNIT_LOSSBATCHES_H
#define RLHF_TEST_UNIT_LOSSBATCHES_H

#include "rlhf/runtime/Train.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <string>
#include <vector>

namespace rlhf::testfns {

/// The inputs of the stdlib loss `name` (sft_loss, ppo_actor_loss and
/// ppo_entropy_loss with per-token advantages, grpo_loss with per-sequence ones, ppo_value_loss)
/// for `tokens` [N, S], drawn from a generator seeded 21, with a random
/// loss mask as the mask the token input carries.
inline TrainBatch randomLossBatch(const std::string &name,
                                  const at::Tensor &tokens) {
  const int64_t N = tokens.size(0), S1 = tokens.size(1) - 1;
  auto g = at::make_generator<at::CPUGeneratorImpl>(21);
  at::Tensor mask = (at::rand({N, S1}, g) > 0.3).to(at::kFloat);
  at::Tensor oldLogprobs = -at::rand({N, S1}, g) * 7;
  at::Tensor refLogprobs = -at::rand({N, S1}, g) * 7;
  at::Tensor advantages = at::randn({N}, g);
  at::Tensor oldValues = at::randn({N, S1}, g) * 0.1;
  at::Tensor returns = at::randn({N, S1}, g);
  TrainBatch b;
  b.inputs = name == "sft_loss" ? std::vector<at::Tensor>{tokens}
             : name == "ppo_actor_loss" || name == "ppo_entropy_loss"
                 ? std::vector<at::Tensor>{tokens, oldLogprobs,
                                           advantages.unsqueeze(1)
                                               .expand({N, S1})
                                               .contiguous()}
             : name == "grpo_loss"
                 ? std::vector<at::Tensor>{tokens, oldLogprobs, advantages,
                                           refLogprobs}
                 : std::vector<at::Tensor>{tokens, oldValues, returns};
  b.masks = {mask};
  return b;
}

/// Data-parallel rank `dpRank` of `dp`'s rows of `b`: its slice of each of
/// the `minibatches` minibatches, in order.
inline TrainBatch dpRows(const TrainBatch &b, int64_t minibatches, int dpRank,
                         int dp) {
  auto mine = [&](const at::Tensor &t) {
    const int64_t per = t.size(0) / minibatches;
    std::vector<at::Tensor> parts;
    for (int64_t k = 0; k < minibatches; ++k)
      parts.push_back(t.narrow(0, k * per + dpRank * (per / dp), per / dp));
    return at::cat(parts, 0);
  };
  TrainBatch r;
  for (const at::Tensor &t : b.inputs)
    r.inputs.push_back(mine(t));
  for (const at::Tensor &t : b.masks)
    r.masks.push_back(mine(t));
  return r;
}

/// The stdlib losses the layout tests train with: the value loss for a
/// value head, else SFT's, PPO's with its entropy bonus (log-probs and
/// entropy of one model) and GRPO's. `plainPpo` trains PPO without the bonus:
/// with bf16 weights the bonus's gradient (a sum over the vocabulary) leaves
/// Adam's moments up to 27% apart from one process's (measured at tp 2 x dp 2,
/// through whole logits and vocabulary-parallel alike), where the other
/// losses stay within the 7% that tests their slicing under ZeRO.
inline std::vector<std::string> layoutTestLosses(bool valueHead,
                                                 bool plainPpo = false) {
  if (valueHead)
    return {"ppo_value_loss"};
  return {"sft_loss", plainPpo ? "ppo_actor_loss" : "ppo_entropy_loss",
          "grpo_loss"};
}

/// Adam as the layout tests' train steps run it, with clipping.
inline AdamSettings layoutTestAdam() {
  AdamSettings as;
  as.lr = 1e-3;
  as.gradClip = 0.5;
  as.eps = 1e-6; // keeps fp32 noise in tiny gradients from being amplified
  return as;
}

} // namespace rlhf::testfns

#endif // RLHF_TEST_UNIT_LOSSBATCHES_H
