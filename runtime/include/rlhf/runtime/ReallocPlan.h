//===- ReallocPlan.h - slice-level parameter reallocation plans -*- C++ -*-===//
//
// Which GPU sends which slice of which parameter to whom, when a model moves
// from one (mesh, dp, tp, pp) layout to another. Torch-free: the compiler's
// cost model prices exactly the plan the runtime executes.
//
// Layout convention: within a mesh of dp*tp*pp GPUs starting at `firstGpu`,
// the GPU of (dp rank d, pipeline stage s, tensor rank t) is
//   firstGpu + (d * pp + s) * tp + t,
// so tensor-parallel groups are contiguous (and stay inside a node).
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_REALLOCPLAN_H
#define RLHF_RUNTIME_REALLOCPLAN_H

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rlhf {

/// The decoder's shape, as far as parameter placement is concerned.
struct ModelShape {
  int64_t layers = 0, hidden = 0, heads = 0, kvHeads = 0, ffn = 0, vocab = 0;
  bool tieEmbeddings = false;
  bool valueHead = false;
  bool qkvBias = false; ///< q/k/v projections carry biases (Qwen2)
};

/// How a parameter is split across tensor-parallel ranks.
enum class Shard {
  Replicated, ///< every tp rank holds all of it (norms, value head)
  Dim0,       ///< split along dim 0 (column-parallel weights, vocab rows)
  Dim1,       ///< split along dim 1 (row-parallel weights)
};

struct ParamSpec {
  std::string name; ///< Hugging Face LLaMA name, e.g. model.layers.3.mlp.up_proj.weight
  int64_t rows = 0, cols = 1;
  int layer = -1; ///< decoder layer, or -1 (embedding) / -2 (final norm, head)
  Shard shard = Shard::Replicated;
  int64_t numel() const { return rows * cols; }
  /// Norm weights and biases are vectors of `rows` elements.
  bool vector() const { return cols == 1; }
};

/// Every parameter of the decoder, the sum over llamaParams: the count the
/// planner, the cost model and the checkpoint loader agree on.
int64_t parameterCount(const ModelShape &m);

/// Every parameter of the model in a fixed order.
std::vector<ParamSpec> llamaParams(const ModelShape &m);

struct Layout {
  int64_t firstGpu = 0;
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t size() const { return dp * tp * pp; }
  bool contains(int64_t g) const {
    return g >= firstGpu && g < firstGpu + size();
  }
  int64_t gpu(int64_t d, int64_t s, int64_t t) const {
    return firstGpu + (d * pp + s) * tp + t;
  }
  /// The inverse of gpu(): (dp rank, stage, tp rank) of a GPU in the layout.
  struct Coords {
    int64_t d, s, t;
  };
  std::optional<Coords> coordsOf(int64_t g) const {
    if (!contains(g))
      return std::nullopt;
    int64_t rel = g - firstGpu;
    return Coords{rel / (tp * pp), (rel / tp) % pp, rel % tp};
  }
};

/// The stage holding `layer` (-1: first stage, -2: last stage).
int64_t stageOf(int layer, int64_t layers, int64_t pp);

/// The decoder layers [first, second) that `stage` of `pp` holds: the
/// inverse of stageOf.
std::pair<int64_t, int64_t> stageLayers(int64_t stage, int64_t layers,
                                        int64_t pp);

/// Fraction [lo, hi) of the sharded dimension tp rank `t` holds.
struct Range {
  double lo = 0, hi = 1;
};
Range shardRange(Shard s, int64_t t, int64_t tp);

/// One slice to move: elements [lo, hi) (as fractions of the sharded dim;
/// [0, 1) for replicated parameters) of parameter `param`.
struct SliceMove {
  int param = 0;
  int64_t src = 0, dst = 0; ///< global GPU ids; src == dst means already there
  double lo = 0, hi = 1;
  int64_t bytes = 0;
};

struct ReallocPlan {
  std::vector<SliceMove> moves;
  int64_t localBytes = 0; ///< already on the destination GPU
  int64_t intraNodeBytes = 0;
  int64_t interNodeBytes = 0;
  /// Bytes each GPU sends and receives over NVLink and the network, indexed
  /// by global GPU id.
  std::vector<int64_t> sendIntra, recvIntra, sendInter, recvInter;
};

/// Plans moving every parameter from `from` to `to`. Each destination slice
/// comes from a GPU holding it, preferring the destination itself, then a
/// GPU on the same node, spreading the load over the dp replicas that hold
/// it. `bytesPerElement` is 2 for bf16 weights.
ReallocPlan planRealloc(const std::vector<ParamSpec> &params, const Layout &from,
                        const Layout &to, int64_t layers, int64_t gpusPerNode,
                        int64_t bytesPerElement = 2);

} // namespace rlhf

#endif // RLHF_RUNTIME_REALLOCPLAN_H
