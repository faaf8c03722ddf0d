//===- Pipeline.cpp - the 1F1B schedule of a pipeline stage ---------------===//

#include "Pipeline.h"

#include "rlhf/runtime/Error.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

using namespace rlhf;

std::vector<PipeStep> rlhf::oneFOneB(int stage, int stages, int64_t micro) {
  const int64_t warmup = std::min<int64_t>(stages - 1 - stage, micro);
  std::vector<PipeStep> steps;
  for (int64_t u = 0; u < warmup; ++u)
    steps.push_back({PipeStep::Forward, u});
  for (int64_t u = warmup; u < micro; ++u) {
    steps.push_back({PipeStep::Forward, u});
    steps.push_back({PipeStep::Backward, u - warmup});
  }
  for (int64_t u = micro - warmup; u < micro; ++u)
    steps.push_back({PipeStep::Backward, u});
  return steps;
}

std::vector<PipeStep> rlhf::sequentialSchedule(int, int, int64_t micro) {
  std::vector<PipeStep> steps;
  for (int64_t u = 0; u < micro; ++u) {
    steps.push_back({PipeStep::Forward, u});
    steps.push_back({PipeStep::Backward, u});
  }
  return steps;
}

std::vector<PipeExchange>
rlhf::pipeExchanges(const std::vector<PipeStep> &steps, int stage, int stages) {
  const bool first = stage == 0, last = stage == stages - 1;
  std::vector<PipeExchange> out(steps.size() + 1);
  for (size_t i = 0; i < steps.size(); ++i) {
    const PipeStep &st = steps[i];
    const bool forward = st.kind == PipeStep::Forward;
    // A receive goes before its step; a send waits for the next step's
    // receive and goes with it.
    if (forward && !first)
      out[i].recvs.push_back(
          {PipeMessage::Activation, st.micro, stage - 1, stage});
    if (forward && !last)
      out[i + 1].sends.push_back(
          {PipeMessage::Activation, st.micro, stage, stage + 1});
    if (!forward && !last)
      out[i].recvs.push_back(
          {PipeMessage::Gradient, st.micro, stage + 1, stage});
    if (!forward && !first)
      out[i + 1].sends.push_back(
          {PipeMessage::Gradient, st.micro, stage, stage - 1});
  }
  return out;
}

void rlhf::runPipeline(
    LlamaModel &model, const std::vector<PipeStep> &steps, bool head,
    const std::function<at::Tensor(int64_t)> &tokensOf,
    const std::function<void(int64_t, const at::Tensor &)> &lossBackward) {
  Communicator *comm = model.ppComm();
  const int stage = model.stage();
  const std::vector<PipeExchange> plan =
      pipeExchanges(steps, stage, model.stages());
  std::map<int64_t, at::Tensor> inputs, grads; // received, by micro-batch
  std::map<int64_t, StageActivations> held;    // forwards awaiting backward
  // Computed, not yet sent: by kind and micro-batch.
  std::map<std::pair<int, int64_t>, at::Tensor> outgoing;
  auto post = [&](const PipeExchange &x) {
    if (x.sends.empty() && x.recvs.empty())
      return;
    std::vector<Communicator::Peer> sends, recvs;
    for (const PipeMessage &m : x.sends) {
      auto it = outgoing.find({m.kind, m.micro});
      sends.push_back({it->second, m.to});
      outgoing.erase(it);
    }
    for (const PipeMessage &m : x.recvs) {
      at::Tensor buf = m.kind == PipeMessage::Activation
                           ? model.stageInputFor(tokensOf(m.micro))
                           : at::empty_like(held.at(m.micro).output);
      (m.kind == PipeMessage::Activation ? inputs : grads)[m.micro] = buf;
      recvs.push_back({buf, m.from});
    }
    comm->exchange(sends, recvs);
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    post(plan[i]);
    const PipeStep &st = steps[i];
    if (st.kind == PipeStep::Forward) {
      at::Tensor in;
      if (auto it = inputs.find(st.micro); it != inputs.end()) {
        in = it->second;
        inputs.erase(it);
      }
      StageActivations a = model.stageRun(tokensOf(st.micro), in, head);
      if (!model.lastStage())
        outgoing[{PipeMessage::Activation, st.micro}] = a.output.detach();
      held[st.micro] = std::move(a);
      continue;
    }
    auto it = held.find(st.micro);
    if (it == held.end())
      throw Error("pipeline schedule: backward of micro-batch " +
                  std::to_string(st.micro) + " before its forward");
    at::Tensor gradOut;
    if (model.lastStage())
      lossBackward(st.micro, it->second.output);
    else
      gradOut = grads.at(st.micro);
    grads.erase(st.micro);
    at::Tensor g = model.stageGrad(it->second, gradOut);
    held.erase(it); // its activations go now
    if (!model.firstStage())
      outgoing[{PipeMessage::Gradient, st.micro}] = g;
  }
  post(plan.back());
}
