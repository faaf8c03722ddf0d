//===- SeqSplit.h - a sequence's length under sequence parallelism -*- C++ -*-===//
//
// Under sp the runtime pads each sequence at its end (runtime/lib/
// ModelForward.cpp's SpSplit) and the cost model prices the padded
// positions. Torch-free, so both include it.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_SEQSPLIT_H
#define RLHF_RUNTIME_SEQSPLIT_H

#include <cstdint>
#include <algorithm>
#include <numeric>

namespace rlhf {

/// The length `S` tokens take when split over `sp` ranks, `ring` of them in
/// a ring, with each rank's positions sharded over `tpShards`: zigzag ring
/// attention gives each ring rank two equal spans (2 x ring), and each sp
/// rank's chunk must split into whole tp blocks. The padding follows every
/// real position, so causal attention leaves the real outputs unchanged.
inline int64_t spPaddedLength(int64_t S, int64_t sp, int64_t ring,
                              int64_t tpShards) {
  if (sp <= 1 || S <= 0)
    return S;
  const int64_t unit = std::lcm<int64_t>(sp * std::max<int64_t>(tpShards, 1),
                                         ring > 1 ? 2 * ring : 1);
  return (S + unit - 1) / unit * unit;
}

} // namespace rlhf

#endif // RLHF_RUNTIME_SEQSPLIT_H
