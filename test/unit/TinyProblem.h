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

#include <algorithm>
#include <limits>

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

/// Gives every model call a candidate per aligned mesh, tp up to `maxTp`
/// and pp up to `maxPp` (data parallel for the rest), offloaded too where
/// its model may be.
inline void addCandidates(Problem &p,
                          int64_t maxTp = std::numeric_limits<int64_t>::max(),
                          int64_t maxPp = 1) {
  p.cands.assign(p.calls.size(), {});
  for (size_t c = 0; c < p.calls.size(); ++c) {
    if (p.calls[c].host)
      continue;
    const Model &m = p.models[p.calls[c].model];
    for (bool offload : {false, true}) {
      if (offload && !m.offloadable)
        continue;
      for (int64_t size = 1; size <= p.gpus; size *= 2)
        for (int64_t first = 0; first < p.gpus; first += size)
          for (int64_t tp = 1; tp <= std::min(size, maxTp); tp *= 2)
            for (int64_t pp = 1; pp <= std::min(maxPp, size / tp); pp *= 2) {
              cost::Strategy s;
              s.firstGpu = first;
              s.tp = tp;
              s.pp = pp;
              s.dp = size / tp / pp;
              s.offload = offload;
              p.cands[c].push_back(
                  Candidate::priced(m.arch, p.hw, s, p.calls[c].shape));
            }
    }
  }
}

/// PPO's dataflow on one node of `gpus` GPUs (actor, critic, reference and
/// reward; the generator may run one version ahead), every call on any
/// aligned mesh with tp and pp up to `split` (data parallel for the rest);
/// with `offloadFrozen`, the reference and reward offloaded too.
inline Problem ppoOnOneNode(int64_t gpus, int64_t genLen, int64_t split,
                            int64_t actorLayers, int64_t criticLayers,
                            bool offloadFrozen = false) {
  Problem p = test::fourGpus(80e9);
  p.hw.gpusPerNode = p.gpus = gpus;
  auto arch = [](int64_t layers) {
    return cost::Arch::get(test::llamaShape(layers, 4096, 32, 32, 11008), 4096);
  };
  p.models = {{"actor", arch(actorLayers), true},
              {"critic", arch(criticLayers), true},
              {"ref", arch(actorLayers), false, offloadFrozen},
              {"reward", arch(criticLayers), false, offloadFrozen}};
  const double rows = 64 * 256 * 4.0;
  test::addCall(p, 0, cost::CallKind::Generate, {});
  test::addCall(p, 3, cost::CallKind::Inference, {{0, rows}});
  test::addCall(p, 2, cost::CallKind::Inference, {{0, rows}});
  test::addCall(p, 1, cost::CallKind::Inference, {{0, rows}});
  Call gae;
  gae.host = true;
  gae.hostTime = 0.01;
  gae.deps = {{1, rows}, {2, rows}, {3, rows}};
  p.calls.push_back(gae);
  test::addCall(p, 0, cost::CallKind::Train, {{0, rows}, {4, rows}});
  test::addCall(p, 1, cost::CallKind::Train, {{3, rows}, {4, rows}});
  p.calls[0].shape.genLen = genLen;
  p.staleness = 1;
  p.calls[0].stale = 1;
  addCandidates(p, split, split);
  return p;
}

} // namespace rlhfc::plan::test

#endif // RLHFC_TEST_UNIT_TINYPROBLEM_H
