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

#include "rlhfc/Planner/Planner.h"

namespace rlhfc::plan::test {

inline rlhf::ModelShape llamaShape(int64_t layers, int64_t hidden,
                                   int64_t ffn) {
  rlhf::ModelShape s;
  s.layers = layers;
  s.hidden = hidden;
  s.heads = 32;
  s.kvHeads = 32;
  s.ffn = ffn;
  s.vocab = 32000;
  return s;
}

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
            Candidate k;
            k.s.firstGpu = first;
            k.s.tp = tp;
            k.s.dp = size / tp;
            k.s.offload = offload;
            k.devices = size;
            cost::Estimate e =
                cost::estimateCall(m.arch, p.hw, k.s, p.calls[c].shape);
            k.time = e.time.total();
            k.mem = e.memory;
            p.cands[c].push_back(k);
          }
    }
  }
}

} // namespace rlhfc::plan::test

#endif // RLHFC_TEST_UNIT_TINYPROBLEM_H
