//===- Realloc.h - executing parameter reallocation plans -------*- C++ -*-===//
//
// Moves a model's parameters from one (mesh, dp, tp, pp) layout to another
// across processes, following the slice-level plan of ReallocPlan.h: slices
// bound for the same peer are bucketed into one message, and every rank
// walks the peer pairs in one global order, so the blocking point-to-point
// exchange cannot deadlock. Afterwards a rank holds exactly its shard of
// the target layout, and nothing if it is outside the target mesh.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_REALLOC_H
#define RLHF_RUNTIME_REALLOC_H

#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Model.h"

namespace rlhf {

/// The parameters GPU `gpu` holds under `layout`: its pipeline stage's
/// parameters, sharded for its tensor rank, in one allocation (flatShard).
/// Empty outside the mesh.
ParamMap layoutShard(const ModelConfig &cfg, const ParamMap &full,
                     const Layout &layout, int64_t gpu);

/// This rank's shard of a new model laid out as `layout`: the weights of the
/// safetensors file `path` (rank 0 reads it, reallocation scatters it) or,
/// when `path` is empty, the random init of `seed`. Collective.
ParamMap initialShard(const ModelConfig &cfg, const Layout &layout,
                      Communicator &world, uint64_t seed,
                      const std::string &path);

struct ReallocStats {
  int64_t bytesSent = 0, bytesReceived = 0, bytesLocal = 0;
  int64_t messages = 0;
  /// Host wall time mapping peers' memory (CUDA IPC) and in exchanges with
  /// peers, waiting for them included: where a move's time goes.
  double mapSeconds = 0, exchangeSeconds = 0;
};

/// Reallocates `mine` (this rank's shard under `from`) into its shard under
/// `to`, whose tensors are made with `opts` (dtype and device; the source
/// must have that dtype, and the bytes moved are its element size each).
/// `world` must span every GPU of both meshes, its rank being the GPU id.
/// Throws rlhf::Error (naming the peer) when a transfer fails.
ParamMap reallocate(const ModelConfig &cfg, ParamMap mine, const Layout &from,
                    const Layout &to, Communicator &world,
                    ReallocStats *stats = nullptr,
                    const at::TensorOptions &opts = at::kFloat);

/// Moves a batch between meshes. Under `from`, the data-parallel head of
/// each dp group (its last pipeline stage, tensor rank 0) holds that group's
/// contiguous slice of the `rows`-row batch in `mine`; under `to`, every
/// first-stage rank of dp group d needs slice d. Returns this rank's slice
/// under `to` (undefined elsewhere). `like` gives the per-row shape and type.
at::Tensor transferBatch(const at::Tensor &mine, int64_t rows, const at::Tensor &like,
                         const Layout &from, const Layout &to, Communicator &world);

} // namespace rlhf

#endif // RLHF_RUNTIME_REALLOC_H
