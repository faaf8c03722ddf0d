//===- Checkpoint.h - layout-independent checkpoints ------------*- C++ -*-===//
//
// A checkpoint is the full model (and Adam's moments) in Hugging Face names,
// independent of how it was sharded: saving gathers the shards to rank 0 by
// reallocating to a one-GPU layout, and resuming scatters them to whatever
// layout the new plan uses. So a run saved under one plan resumes under
// another.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_CHECKPOINT_H
#define RLHF_RUNTIME_CHECKPOINT_H

#include "rlhf/runtime/Realloc.h"
#include "rlhf/runtime/Train.h"

namespace rlhf {

struct CheckpointState {
  ParamMap params;             ///< this rank's shard in the requested layout
  ParamMap adamM, adamV;       ///< empty when the checkpoint has no optimizer
  int64_t adamSteps = 0;
  int64_t step = 0; ///< training steps done when it was taken
};

/// Writes `dir`/model.safetensors, optimizer.safetensors (if `opt`) and
/// state.json. Every rank of `world` calls it; rank 0 writes, atomically
/// (to a temporary name, then renamed).
void saveCheckpoint(const std::string &dir, const ModelConfig &cfg,
                    const ParamMap &mine, const Adam *opt, const Layout &layout,
                    Communicator &world, int64_t step);

/// The whole fp32 weights of a model sharded over `layout` (Adam's master
/// weights where it keeps them), gathered through host memory to rank 0;
/// other ranks get an empty map. Every rank of `world` calls it.
ParamMap gatherWeights(const ModelConfig &cfg, const ParamMap &mine,
                       const Adam *opt, const Layout &layout,
                       Communicator &world);

/// Reads a checkpoint written by saveCheckpoint into `layout`.
CheckpointState loadCheckpoint(const std::string &dir, const ModelConfig &cfg,
                               const Layout &layout, Communicator &world);

} // namespace rlhf

#endif // RLHF_RUNTIME_CHECKPOINT_H
