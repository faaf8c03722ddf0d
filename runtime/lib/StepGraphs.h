//===- StepGraphs.h - replaying a decode step as a CUDA graph ---*- C++ -*-===//
//
// A decode step of a 7B model launches ~700 small kernels; at small batch the
// GPU finishes them faster than LibTorch can launch them. StepGraphs captures
// a step once per key (the attention window) and replays it with one launch.
// The step must read and write only tensors that outlive it (static buffers)
// and take no host decision from device values.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_STEPGRAPHS_H
#define RLHF_RUNTIME_STEPGRAPHS_H

#include "rlhf/runtime/Communicator.h"

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace rlhf {

class StepGraphs {
public:
  /// Graphs on a CUDA device unless `enabled` is false or RLHF_CUDA_GRAPHS=0;
  /// elsewhere every run is eager. RLHF_CUDA_GRAPHS=require makes a failed
  /// capture an error instead of a fallback (the GPU tests set it). When
  /// steps hold collectives, `agree` takes whether this rank's capture
  /// worked and returns whether every rank's did (a collective itself), so
  /// that all replay or all fall back: none waits on a peer's other path.
  StepGraphs(c10::Device device, bool enabled,
             std::function<bool(bool)> agree = {});
  ~StepGraphs();
  StepGraphs(const StepGraphs &) = delete;
  StepGraphs &operator=(const StepGraphs &) = delete;

  /// Runs `step`: the first time for `key` eagerly (a warm-up that also gives
  /// this step's results) and then captures it; later times replays the
  /// capture. A failed capture falls back to eager steps with a warning.
  void run(int64_t key, const std::function<void()> &step);

  /// Whether steps are being replayed from graphs (false once a capture
  /// failed, or where graphs are off).
  bool active() const;
  int64_t captures() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// StepGraphs' `agree` for steps holding collectives over `group`: an
/// all-reduce of this rank's failure on `device`, so every rank learns
/// whether all captures worked.
inline std::function<bool(bool)> agreeOver(Communicator &group,
                                           c10::Device device) {
  return [&group, device](bool captured) {
    at::Tensor failed = at::full({1}, captured ? 0.0f : 1.0f,
                                 at::TensorOptions().device(device));
    group.allReduceSum(failed);
    return failed.item<float>() == 0.0f;
  };
}

} // namespace rlhf

#endif // RLHF_RUNTIME_STEPGRAPHS_H
