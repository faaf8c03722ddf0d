//===- Model.h - a tensor-parallel LLaMA decoder in LibTorch ----*- C++ -*-===//
//
// RMSNorm, rotary embeddings, SwiGLU, grouped-query attention, an lm or a
// value head. Parameters carry Hugging Face LLaMA names and hold this rank's
// shard: q/k/v/gate/up and the vocabulary are split by rows
// (column-parallel), o/down by columns (row-parallel), norms are replicated
// (the same layout rlhf::llamaParams and the reallocation planner use).
// Tensor-parallel collectives are autograd functions, so a backward pass
// through a sharded model gives the sharded gradients.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_MODEL_H
#define RLHF_RUNTIME_MODEL_H

#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/ReallocPlan.h"

#include <ATen/ATen.h>

#include <map>
#include <string>

namespace rlhf {

struct ModelConfig {
  ModelShape shape;
  int64_t maxSeq = 256;
  double ropeTheta = 10000.0;
  double normEps = 1e-5;
};

/// This rank's tensor-parallel group; `comm` is null when size == 1.
struct TensorParallel {
  Communicator *comm = nullptr;
  int rank = 0, size = 1;
};

using ParamMap = std::map<std::string, at::Tensor>;

/// Full (unsharded) parameters with a deterministic random init: every
/// parameter draws from a generator seeded by `seed` and its name, so any
/// layout can be built from the same numbers.
ParamMap initParams(const ModelConfig &cfg, uint64_t seed);

/// The slice of `full` that tensor rank `tp.rank` of `tp.size` holds.
ParamMap shardParams(const ModelConfig &cfg, const ParamMap &full, int tpRank,
                     int tpSize);

class LlamaModel {
public:
  LlamaModel(ModelConfig cfg, ParamMap shard, TensorParallel tp);

  /// Logits [B, S, vocab] (lm head, gathered over tp) or values [B, S]
  /// (value head) for token ids [B, S]. `positions` [B, S] default to 0..S-1.
  at::Tensor forward(const at::Tensor &tokens,
                     const c10::optional<at::Tensor> &positions = c10::nullopt);

  ParamMap &params() { return params_; }
  const ModelConfig &config() const { return cfg; }

private:
  at::Tensor layer(int l, const at::Tensor &x, const at::Tensor &cos,
                   const at::Tensor &sin, const at::Tensor &mask);
  const at::Tensor &p(const std::string &name) const;

  ModelConfig cfg;
  ParamMap params_;
  TensorParallel tp;
};

} // namespace rlhf

#endif // RLHF_RUNTIME_MODEL_H
