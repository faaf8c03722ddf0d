//===- LongContext.cpp - USP's sp split, FlashAttention and ring pricing --===//
//
// The pieces of the cost model that only matter at long context: how
// sequence-parallel ranks split into Ulysses and ring degrees, FlashAttention
// time, and the exposed part of ring attention's K/V passing. Formulas and
// assumptions are in docs/cost-model.md.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/CostModel/CostModel.h"

#include <algorithm>

using namespace rlhfc::cost;

SpSplit rlhfc::cost::splitSp(int64_t sp, int64_t tp, int64_t heads,
                             int64_t gpusPerNode) {
  SpSplit out;
  if (sp <= 1 || tp <= 0)
    return out;
  const int64_t headsPerTp = heads / tp;
  // Ulysses ranks sit tp apart (ranks run dp, sp, pp, tp from the outside
  // in, and sp implies pp = 1): a group of u spans u * tp GPUs, which must
  // tile a node so that no all-to-all crosses one.
  for (int64_t u = sp; u >= 1; --u)
    if (sp % u == 0 && gpusPerNode % (u * tp) == 0 && headsPerTp % u == 0) {
      out.ulysses = u;
      break;
    }
  out.ring = sp / out.ulysses;
  return out;
}

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
