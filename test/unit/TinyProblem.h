//===- TinyProblem.h - hand-built planner problems for unit tests --*- C++
//-*-===//
//
// Problems small enough to enumerate: calls on one node of four H100s,
// each with a candidate on every aligned mesh of 1, 2 or 4 GPUs and every
// tp, priced by the cost model.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_TEST_UNIT_TINYPROBLEM_H
#define RLHFC_TEST_UNIT_TINYPROBLEM_H

#include "LlamaShape.h"
#include "rlhfc/Planner/Planner.h"

namespace rlhfc::plan::test {

using rlhfc::shapes::llamaShape;

/// One node of four H100s and no calls yet.
inline Problem fourGpus(double memoryLimit) {
  Problem p;
  p.hw = *cost::knownHardware("H100_SXM");
  p.hw.gpusPerNode = 4;
  p.gpus = 4;
  p.nodes = 1;
  p.memoryLimit = memoryLimit;
  return p;
}

/// Appends a call of `model` on a batch of 64 sequences (prompt 128, 128
/// new tokens, 256 tokens otherwise).
inline void addCall(Problem &p, int model, cost::CallKind kind,
                    std::vector<std::pair<int, double>> deps) {
  Call c;
  c.model = model;
  c.shape.kind = kind;
  c.shape.batch = 64;
  c.shape.promptLen = 128;
  c.shape.genLen = 128;
  c.shape.seqLen = 256;
  c.shape.trainable = p.models[model].trainable;
  c.deps = std::move(deps);
  p.calls.push_back(c);
}

/// Gives every model call a candidate per aligned mesh and tp, offloaded
/// too where its model may be.
inline void addCandidates(Problem &p) {
  p.cands.assign(p.calls.size(), {});
  for (size_t c = 0; c < p.calls.size(); ++c) {
    if (p.calls[c].host)
      continue;
    const Model &m = p.models[p.calls[c].model];
    for (bool offload : {false, true}) {
      if (offload && !m.offloadable)
        continue;
      for (int64_t size = 1; size <= 4; size *= 2)
        for (int64_t first = 0; first < 4; first += size)
          for (int64_t tp = 1; tp <= size; tp *= 2) {
            cost::Strategy s;
            s.firstGpu = first;
            s.tp = tp;
            s.dp = size / tp;
            s.offload = offload;
            p.cands[c].push_back(
                Candidate::priced(m.arch, p.hw, s, p.calls[c].shape));
          }
    }
  }
}

} // namespace rlhfc::plan::test

#endif // RLHFC_TEST_UNIT_TINYPROBLEM_H
