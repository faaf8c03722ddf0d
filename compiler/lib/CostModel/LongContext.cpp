//===- LongContext.cpp - FlashAttention and ring attention pricing --------===//
//
// The pieces of the cost model that only matter at long context:
// FlashAttention time and the exposed part of ring attention's K/V passing
// (mlir::rlhf::splitSp decides the ring). Formulas and
// assumptions are in docs/cost-model.md.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/CostModel/CostModel.h"

#include <algorithm>

using namespace rlhfc::cost;

double rlhfc::cost::causalAttentionFlops(double tokens, double ctx,
                                         double hidden, double layers) {
  return 2.0 * tokens * ctx * hidden * layers;
}

double rlhfc::cost::attentionTime(double flops, const Hardware &hw) {
  return flops <= 0 ? 0 : flops / (hw.flops * hw.eff.attention);
}

double rlhfc::cost::ringExposed(double blockBytes, double stepCompute,
                                int64_t ring, const Link &l) {
  if (ring <= 1)
    return 0;
  return double(ring - 1) * std::max(0.0, p2p(blockBytes, l) - stepCompute);
}
