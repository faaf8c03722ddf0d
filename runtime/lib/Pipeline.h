//===- Pipeline.h - the 1F1B schedule of a pipeline stage -------*- C++ -*-===//
//
// A train step's micro-batches through pipeline stages, in the order the
// cost model prices: one-forward-one-backward (PipeDream-Flush, as
// Megatron-LM runs it). Stage s of P runs min(P-1-s, M) forwards ahead,
// then alternates a forward and a backward, then drains; so the stages
// work at once (M + P - 1 stage slots a step instead of M x P), and stage s
// holds at most P - s micro-batches of activations.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_PIPELINE_H
#define RLHF_RUNTIME_PIPELINE_H

#include "rlhf/runtime/Model.h"

#include <functional>
#include <vector>

namespace rlhf {

/// One step of a stage's schedule: a micro-batch's forward or backward. Its
/// messages follow from the stage's place (pipeExchanges): a forward
/// receives its input from the stage before unless first and sends its
/// output on unless last; a backward receives its output's gradient unless
/// last and sends its input's gradient back unless first.
struct PipeStep {
  enum Kind { Forward, Backward } kind;
  int64_t micro;
};

/// The 1F1B order of `stage` of `stages` over `micro` micro-batches.
/// Forwards and backwards each go in micro-batch order, so gradients
/// accumulate as in the sequential order and results are bit-identical.
std::vector<PipeStep> oneFOneB(int stage, int stages, int64_t micro);

/// The order before 1F1B, kept for side-by-side measurement
/// (RLHF_PIPELINE_SCHEDULE=sequential): each micro-batch's forward and
/// backward through every stage before the next, one stage busy at a time.
std::vector<PipeStep> sequentialSchedule(int stage, int stages, int64_t micro);

/// A message between neighbouring stages: micro-batch `micro`'s activation
/// (from `from` to from + 1) or its gradient (to from - 1).
struct PipeMessage {
  enum Kind { Activation, Gradient } kind;
  int64_t micro;
  int from, to;
  bool operator==(const PipeMessage &o) const {
    return kind == o.kind && micro == o.micro && from == o.from && to == o.to;
  }
};

/// The messages of one exchange: posted together, waited for together.
struct PipeExchange {
  std::vector<PipeMessage> sends, recvs;
};

/// The exchanges runPipeline posts for `steps` of `stage` of `stages`:
/// before step i, `exchanges[i]` (the previous step's send with this step's
/// receive; posting them together, as Megatron's send_forward_recv_backward
/// does, keeps neighbouring stages from waiting on each other's sends);
/// after the last step, `exchanges[steps.size()]` (the last send).
std::vector<PipeExchange> pipeExchanges(const std::vector<PipeStep> &steps,
                                        int stage, int stages);

/// Runs `steps` on this rank's stage of `model`: `tokensOf(u)` gives
/// micro-batch u's tokens, and on the last stage `lossBackward(u, output)`
/// runs backward from micro-batch u's loss. Messages go over the model's
/// pipeline communicator, each send posted with the receive after it.
void runPipeline(
    LlamaModel &model, const std::vector<PipeStep> &steps, bool head,
    const std::function<at::Tensor(int64_t)> &tokensOf,
    const std::function<void(int64_t, const at::Tensor &)> &lossBackward);

} // namespace rlhf

#endif // RLHF_RUNTIME_PIPELINE_H
