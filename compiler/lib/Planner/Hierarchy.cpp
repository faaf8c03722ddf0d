//===- Hierarchy.cpp - planning large clusters on a scaled-down copy ------===//
//
// The direct search slows with the cluster: meshes grow with the square of
// the node count (50,000 candidates at 64 nodes), and each reallocation
// estimate walks the GPUs of both layouts (8 ms between two layouts of
// 4096 GPUs). Above kDirectNodes nodes the planner plans a copy of the
// problem on k times fewer nodes instead, at most 16, each call with a k-th
// of its batch, and scales the plan up: a mesh of n nodes at node f becomes
// k*n nodes at node k*f, dp becomes k*dp, and tp, pp and micro-batches stay.
// Per GPU the scaled-up call runs the same rows through the same layers,
// holds the same memory (less, with ZeRO), and sends and receives as many
// bytes in transfers and reallocations; what grows is the dp all-reduce's
// group. So plans of the copy rank about as their images do, and the copy
// is searched as fast as the benchmark's 128-GPU settings. The images of the
// copy's candidates are the large problem's candidates, with every strategy
// on the whole cluster for the baselines. The search prices the copy's plan
// scaled up, compares it with the baselines, and descends from the best
// over each call's strategies on its mesh and in its model's other layouts.
//
// Where no copy scales (no k leaves a batch, or a pin, split evenly), the
// large cluster is searched directly on the meshes of a 16-node cluster
// scaled up to whole blocks of nodes: fewer meshes than every run of nodes,
// but each evaluation walks every GPU, so this is much slower.
//
//===----------------------------------------------------------------------===//

#include "Hierarchy.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <set>

using namespace rlhfc;
using namespace rlhfc::plan;
using namespace rlhfc::plan::detail;

namespace {

/// The copy has at most this many nodes: as many as the largest benchmark
/// setting, searched in about 3 s.
constexpr int64_t kCoarseNodes = 16;

/// A mesh the planner offers: whole nodes, or an aligned power-of-two run
/// inside one node.
bool isMesh(int64_t first, int64_t size, int64_t gpn) {
  if (first % gpn == 0 && size % gpn == 0)
    return true;
  return size < gpn && (size & (size - 1)) == 0 && first % size == 0 &&
         first / gpn == (first + size - 1) / gpn;
}

cost::Strategy scaledUp(cost::Strategy s, int64_t k) {
  s.firstGpu *= k;
  s.dp *= k;
  return s;
}

std::optional<cost::Strategy> scaledDown(cost::Strategy s, int64_t k) {
  if (s.firstGpu % k || s.dp % k)
    return std::nullopt;
  s.firstGpu /= k;
  s.dp /= k;
  return s;
}

/// The smallest k that divides the node count, leaves at most kCoarseNodes
/// nodes, and splits every call's batch (a train call's every minibatch)
/// and every pin k ways; 1 when there is none.
int64_t scaleFor(const Problem &p) {
  for (int64_t k = 2; k <= p.nodes; ++k) {
    if (p.nodes % k || p.nodes / k > kCoarseNodes)
      continue;
    if (llvm::all_of(p.calls, [&](const Call &c) {
          if (c.host)
            return true;
          int64_t parts = k;
          if (c.shape.kind == cost::CallKind::Train)
            parts *= std::max<int64_t>(1, c.shape.minibatches);
          return c.shape.batch % parts == 0 &&
                 (!c.pinned || scaledDown(*c.pinned, k));
        }))
      return k;
  }
  return 1;
}

/// `p` on p.nodes / k nodes, each call with a k-th of its batch and of the
/// bytes it reads. Host functions keep their time: the controller still
/// computes on the whole batch, once per iteration.
Problem coarseCopy(const Problem &p, int64_t k) {
  Problem q;
  q.hw = p.hw;
  q.nodes = p.nodes / k;
  q.gpus = q.nodes * p.hw.gpusPerNode;
  q.models = p.models;
  q.calls = p.calls;
  q.averages = p.averages;
  q.parked = p.parked;
  q.memoryLimit = p.memoryLimit;
  q.staleness = p.staleness; // the copy is searched as asynchronous too
  q.cands.resize(q.calls.size());
  for (size_t c = 0; c < q.calls.size(); ++c) {
    Call &call = q.calls[c];
    for (auto &dep : call.deps)
      dep.second /= double(k);
    if (call.host)
      continue;
    call.shape.batch /= k;
    if (call.pinned) {
      call.pinned = scaledDown(*call.pinned, k);
      q.cands[c].push_back(Candidate::priced(q.models[call.model].arch, q.hw,
                                             *call.pinned, call.shape));
    }
  }
  return q;
}

bool sameStrategy(const cost::Strategy &a, const cost::Strategy &b) {
  return cost::sameLayout(a, b) && a.microBatches == b.microBatches &&
         a.zero == b.zero && a.recompute == b.recompute &&
         a.offload == b.offload;
}

/// Gives `p` the scaled-up candidates of its copy on p.nodes / k nodes and
/// sets it as p.coarse. False when some call of the copy has no candidate.
bool addScaled(Problem &p, int64_t k, const ProblemOptions &opts,
               std::vector<std::vector<Candidate>> &fitting) {
  const int64_t gpn = p.hw.gpusPerNode;
  Problem q = coarseCopy(p, k);
  std::vector<Mesh> ms;
  // Half a node of the copy is k/2 whole nodes here where k is even.
  for (Mesh m : meshes(q.nodes, gpn, opts.halfNodeMeshes))
    if (isMesh(m.first * k, m.second * k, gpn))
      ms.push_back(m);
  std::vector<std::vector<Candidate>> coarseFitting(q.calls.size());
  if (addCandidates(q, opts, ms, coarseFitting) >= 0)
    return false;
  shareLayouts(q, coarseFitting);

  p.fromCoarse.assign(p.calls.size(), {});
  for (size_t c = 0; c < p.calls.size(); ++c) {
    const Call &call = p.calls[c];
    if (call.host)
      continue;
    if (call.pinned) {
      p.fromCoarse[c] = {0};
      continue;
    }
    for (const Candidate &x : q.cands[c]) {
      Candidate y = Candidate::priced(p.models[call.model].arch, p.hw,
                                      scaledUp(x.s, k), call.shape);
      if (y.mem.total() > p.memoryLimit) {
        p.fromCoarse[c].push_back(-1);
        continue;
      }
      p.fromCoarse[c].push_back(int(p.cands[c].size()));
      p.cands[c].push_back(y);
    }
  }
  // The baselines choose among all strategies on the whole cluster.
  std::vector<size_t> images(p.calls.size());
  for (size_t c = 0; c < p.calls.size(); ++c)
    images[c] = p.cands[c].size();
  const Mesh whole[] = {{0, p.gpus}};
  addCandidates(p, opts, whole, fitting);
  for (size_t c = 0; c < p.calls.size(); ++c) {
    std::vector<Candidate> &cs = p.cands[c];
    auto isImage = [&](const Candidate &x) {
      return std::any_of(
          cs.begin(), cs.begin() + images[c],
          [&](const Candidate &y) { return sameStrategy(x.s, y.s); });
    };
    cs.erase(std::remove_if(cs.begin() + images[c], cs.end(), isImage),
             cs.end());
    if (!p.calls[c].pinned)
      fitting[c].insert(fitting[c].end(), cs.begin(), cs.begin() + images[c]);
  }
  p.scale = k;
  p.coarse = std::make_shared<const Problem>(std::move(q));
  return true;
}

} // namespace

int64_t plan::detail::blockNodes(const Problem &p) {
  return p.nodes > kDirectNodes ? (p.nodes + kCoarseNodes - 1) / kCoarseNodes
                                : 1;
}

int plan::detail::addLargeClusterCandidates(
    Problem &p, const ProblemOptions &opts,
    std::vector<std::vector<Candidate>> &fitting) {
  if (int64_t k = scaleFor(p); k > 1 && addScaled(p, k, opts, fitting)) {
    for (size_t c = 0; c < p.calls.size(); ++c)
      if (!p.calls[c].host && p.cands[c].empty())
        return int(c);
    return -1;
  }
  // The meshes of a kCoarseNodes-node cluster, each node a block of nodes
  // (the last block may be shorter).
  const int64_t gpn = p.hw.gpusPerNode, block = blockNodes(p);
  std::set<Mesh> seen;
  std::vector<Mesh> ms;
  for (auto [first, size] : meshes((p.nodes + block - 1) / block, gpn)) {
    int64_t f = first * block, n = std::min(size * block, p.gpus - f);
    if (n > 0 && isMesh(f, n, gpn) && seen.insert({f, n}).second)
      ms.push_back({f, n});
  }
  return addCandidates(p, opts, ms, fitting);
}

std::optional<Assignment> plan::detail::searchScaled(const Problem &p,
                                                     const SearchOptions &o,
                                                     SearchStats &st) {
  std::optional<Assignment> best;
  double bestScore = kInfTime;
  auto consider = [&](std::optional<Assignment> a) {
    if (!a)
      return;
    SimResult r = simulate(p, *a);
    ++st.evaluated;
    if (!r.oom && r.iterationTime < bestScore) {
      bestScore = r.iterationTime;
      best = std::move(a);
    }
  };
  SearchStats coarse;
  // The coarse copy's times are its own, not the cluster's: say so, or the
  // best would seem to get worse when refining prices it on the cluster.
  SearchOptions co = o;
  if (o.progress)
    co.progress = [&o](llvm::StringRef stage, double done, double best) {
      o.progress(("coarse copy: " + stage).str(), done, best);
    };
  if (std::optional<Assignment> ca =
          solve(*p.coarse, Method::Search, co, &coarse)) {
    Assignment a(p.calls.size(), -1);
    for (size_t c = 0; c < p.calls.size(); ++c)
      if (!p.calls[c].host)
        a[c] = p.fromCoarse[c][(*ca)[c]];
    if (llvm::all_of(llvm::seq(p.calls.size()),
                     [&](size_t c) { return p.calls[c].host || a[c] >= 0; }))
      consider(std::move(a));
  }
  st.evaluated += coarse.evaluated;
  if (o.progress)
    o.progress("refining", 1.0, bestScore);
  for (Method m : {Method::Heuristic, Method::Colocated, Method::Separated})
    consider(solve(p, m));
  if (!best)
    return std::nullopt;
  // The copy cannot express every strategy of the large cluster, and it
  // prices the dp all-reduce over a smaller group: try each call's other
  // strategies on its mesh and in the layouts of its model's other calls,
  // which cost no reallocation. Few moves, since each walks every GPU.
  for (bool improved = true; improved;) {
    improved = false;
    Assignment next = *best;
    for (size_t c = 0; c < p.calls.size(); ++c) {
      const Call &call = p.calls[c];
      if (call.host || call.pinned)
        continue;
      const Candidate &now = p.cands[c][(*best)[c]];
      for (int k = 0; k < int(p.cands[c].size()); ++k) {
        const Candidate &x = p.cands[c][k];
        bool sameMesh =
            x.s.firstGpu == now.s.firstGpu && x.devices == now.devices;
        bool shared = llvm::any_of(llvm::seq(p.calls.size()), [&](size_t d) {
          return d != c && !p.calls[d].host && p.calls[d].model == call.model &&
                 cost::sameLayout(x.s, p.cands[d][(*best)[d]].s);
        });
        if (k == (*best)[c] || (!sameMesh && !shared))
          continue;
        Assignment t = *best;
        t[c] = k;
        SimResult r = simulate(p, t);
        ++st.evaluated;
        if (!r.oom && r.iterationTime < bestScore) {
          bestScore = r.iterationTime;
          next = std::move(t);
          improved = true;
        }
      }
    }
    best = std::move(next);
  }
  st.bestTime = bestScore;
  return best;
}
