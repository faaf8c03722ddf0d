//===- Collectives.cpp - time of NCCL collectives on a group's links ------===//
//
// Ring and tree all-reduce (and NVLink SHARP where the switch reduces), all-
// gather, all-to-all, broadcast and point-to-point over the slowest link of a
// group: NVLink inside a node, the node's NICs across (docs/cost-model.md,
// "Formulas").
//
//===----------------------------------------------------------------------===//

#include "rlhfc/CostModel/CostModel.h"

#include <algorithm>
#include <cmath>

using namespace rlhfc::cost;

int64_t rlhfc::cost::membersPerNode(int64_t first, int64_t n, int64_t stride,
                                    int64_t gpusPerNode) {
  if (n <= 1)
    return 1;
  if (first / gpusPerNode == (first + (n - 1) * stride) / gpusPerNode)
    return n;
  // The fewest on any node it touches: that node's NICs carry the group's
  // traffic across, and a mesh starting mid-node leaves fewer members on its
  // first and last nodes.
  int64_t least = n, count = 0, node = first / gpusPerNode;
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = (first + i * stride) / gpusPerNode;
    if (at != node) {
      least = std::min(least, count);
      node = at;
      count = 0;
    }
    ++count;
  }
  return std::min(least, count);
}

Link rlhfc::cost::groupLink(const Hardware &hw, int64_t n, int64_t perNode) {
  double nvlink = hw.nvlinkBw * hw.eff.nvlink;
  if (perNode >= n) {
    double nvls = n > 2 && hw.eff.nvls > 0 ? hw.nvlinkBw * hw.eff.nvls : 0;
    return {nvlink, hw.eff.nvlinkLatency, nvls};
  }
  double net = double(perNode) * hw.networkBw * hw.eff.network;
  return {std::min(nvlink, net), hw.eff.networkLatency, 0};
}

double rlhfc::cost::allReduce(double bytes, int64_t n, const Link &l) {
  if (n <= 1 || bytes <= 0)
    return 0;
  double steps = std::ceil(std::log2(double(n)));
  double ring = 2.0 * (n - 1) / n * bytes / l.bw + 2.0 * (n - 1) * l.latency;
  double tree = 2.0 * bytes / l.bw + 2.0 * steps * l.latency;
  double best = std::min(ring, tree);
  if (l.nvlsBw > 0) // NVSwitch reduces in the switch: bus bandwidth nvlsBw
    best =
        std::min(best, 2.0 * (n - 1) / n * bytes / l.nvlsBw + 2.0 * l.latency);
  return best;
}

double rlhfc::cost::allGather(double bytesTotal, int64_t n, const Link &l) {
  if (n <= 1 || bytesTotal <= 0)
    return 0;
  return double(n - 1) / n * bytesTotal / l.bw + (n - 1) * l.latency;
}

double rlhfc::cost::allToAll(double bytesPerRank, int64_t n, const Link &l) {
  if (n <= 1 || bytesPerRank <= 0)
    return 0;
  return double(n - 1) / n * bytesPerRank / l.bw + (n - 1) * l.latency;
}

double rlhfc::cost::broadcast(double bytes, int64_t n, const Link &l) {
  if (n <= 1 || bytes <= 0)
    return 0;
  return bytes / l.bw + std::ceil(std::log2(double(n))) * l.latency;
}

double rlhfc::cost::p2p(double bytes, const Link &l) {
  return bytes <= 0 ? 0 : bytes / l.bw + l.latency;
}

double rlhfc::cost::allReduceBusBw(double bytes, int64_t n, const Link &l) {
  double t = allReduce(bytes, n, l);
  return t > 0 ? bytes / t * 2.0 * (n - 1) / n : 0;
}
