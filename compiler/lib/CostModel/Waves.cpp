//===- Waves.cpp - the fewest generation waves that fit -------------------===//
//
// A generate with mbs = m runs a dp rank's rows in m waves, each with a KV
// cache of its own rows (docs/cost-model.md). Fewer, larger waves read the
// weights fewer times, so the planner, and --estimate's hint, take the
// fewest that fit.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/CostModel/CostModel.h"

using namespace rlhfc::cost;

int64_t rlhfc::cost::fewestWaves(const Arch &arch, const Hardware &hw,
                                 Strategy s, const CallShape &c, double limit) {
  const int64_t rows = c.batch / std::max<int64_t>(1, s.dp);
  for (int64_t waves = 1; waves <= rows; ++waves) {
    if (rows % waves)
      continue;
    s.microBatches = waves;
    if (estimateCall(arch, hw, s, c).memory.total() <= limit)
      return waves;
  }
  return 0;
}
