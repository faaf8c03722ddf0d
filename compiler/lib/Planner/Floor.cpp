//===- Floor.cpp - the least iteration time of a relaxed problem ----------===//
//
// iterationBounds with every call at its fastest gives a floor, but the
// fastest generation spans the cluster while the least GPU-seconds come from
// small meshes, and no plan has both. This floor picks one candidate per
// call and minimises max(cycle, area, window) over the picks, dropping
// reallocations, transfers and placement. Memory enters summed over the
// cluster: while a call runs, the GPUs hold every model's resting weights,
// all optimizer state and the call's working set. And calls on more GPUs
// together than the cluster has share one, wherever they are placed, so a
// set of them that pairwise do runs one after another. Every term only grows
// with a candidate's time, GPU-seconds, GPU count and bytes, so a candidate
// that another matches or beats on all of them is never needed: what is left
// per call is a short Pareto front, searched by branch and bound.
//
//===----------------------------------------------------------------------===//

#include "Cycle.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace rlhfc;
using namespace rlhfc::plan;

namespace {

/// What the relaxation keeps of a candidate: its time and, summed over its
/// GPUs, the GPU-seconds and the bytes that the simulator's memory model
/// places (weights, optimizer state, working set).
struct Point {
  double time = 0, area = 0; ///< area: GPU-seconds over the cluster's GPUs
  double work = 0;           ///< activations, KV cache, gradients
  double weights = 0;        ///< the call's copy of its model's weights
  double home = 0;           ///< the same, where the model rests (0: host)
  double state = 0;          ///< optimizer state (train)
  double perGpu = 0;         ///< the call's own bytes on each of its GPUs
  int64_t devices = 0;
  int cand = -1;

  bool dominates(const Point &o) const {
    return time <= o.time && area <= o.area && devices <= o.devices &&
           perGpu <= o.perGpu && work <= o.work && weights <= o.weights &&
           home <= o.home && state <= o.state;
  }
};

struct Relaxed {
  const Problem &p;
  std::vector<std::vector<Point>> front; ///< per call, fastest first
  std::vector<Point> least;              ///< per call, each field's minimum
  std::vector<size_t> order;             ///< calls with a choice
  ModelCalls mc;
  std::vector<int> pick; ///< per call, index into front (-1: not yet)
  std::vector<int> bestPick;
  std::vector<double> dist;
  double best = kInfTime;
  int64_t nodes = 0, nodeLimit;
  bool aborted = false;

  Relaxed(const Problem &p, int64_t nodeLimit)
      : p(p), front(p.calls.size()), least(p.calls.size()), mc(p),
        pick(p.calls.size(), -1), nodeLimit(nodeLimit) {
    const double gpus = double(std::max<int64_t>(1, p.gpus));
    for (size_t c = 0; c < p.calls.size(); ++c) {
      if (p.calls[c].host)
        continue;
      bool train = p.calls[c].shape.kind == cost::CallKind::Train;
      std::vector<Point> pts;
      for (size_t k = 0; k < p.cands[c].size(); ++k) {
        const Candidate &x = p.cands[c][k];
        double d = double(x.devices);
        Point q;
        q.time = x.time;
        q.area = x.time * d / gpus;
        q.work = x.mem.working() * d;
        q.weights = x.mem.weights * d;
        q.home = x.s.offload ? 0 : q.weights;
        q.state = train ? x.mem.optimizer * d : 0;
        q.perGpu = x.mem.total();
        q.devices = x.devices;
        q.cand = int(k);
        pts.push_back(q);
      }
      std::sort(pts.begin(), pts.end(), [](const Point &a, const Point &b) {
        return a.time < b.time || (a.time == b.time && a.area < b.area);
      });
      // Every term only grows with every field: a dominated point is never
      // the better pick.
      for (const Point &q : pts)
        if (llvm::none_of(front[c],
                          [&](const Point &f) { return f.dominates(q); }))
          front[c].push_back(q);
      if (front[c].empty())
        continue;
      Point &l = least[c];
      l = front[c].front();
      for (const Point &q : front[c]) {
        l.area = std::min(l.area, q.area);
        l.work = std::min(l.work, q.work);
        l.weights = std::min(l.weights, q.weights);
        l.home = std::min(l.home, q.home);
        l.state = std::min(l.state, q.state);
        l.perGpu = std::min(l.perGpu, q.perGpu);
        l.devices = std::min(l.devices, q.devices);
      }
      order.push_back(c);
    }
  }

  /// The call's point, or (unpicked) a point no worse than any of its own.
  const Point &at(size_t c) const {
    return pick[c] < 0 ? least[c] : front[c][pick[c]];
  }

  /// Whether memory can hold what the simulator places while each call
  /// runs: every model resting (in its last call's layout), all optimizer
  /// state, and the call's working set and weights. Checked summed over the
  /// cluster, and averaged over the call's GPUs, which hold at least the
  /// share of every other resting tensor that cannot fit beside them.
  /// Necessary, not sufficient, for a plan to fit.
  bool fits() const {
    const double limit = p.memoryLimit, gpus = double(p.gpus);
    // Resting tensors: (GPUs, bytes in all) of picked calls; the sum also
    // counts unpicked ones at their least.
    struct Rest {
      size_t call;
      int model;
      double devices, bytes;
    };
    std::vector<Rest> rest;
    double resting = 0;
    std::vector<double> home(p.models.size(), 0.0);
    for (size_t m = 0; m < p.models.size(); ++m) {
      if (mc.of[m].empty())
        continue;
      size_t last = mc.of[m].back();
      resting += home[m] = at(last).home;
      if (pick[last] >= 0)
        rest.push_back({last, int(m), double(at(last).devices), home[m]});
    }
    for (size_t c = 0; c < p.calls.size(); ++c) {
      if (p.calls[c].host || front[c].empty())
        continue;
      resting += at(c).state;
      if (pick[c] >= 0 && at(c).state > 0)
        rest.push_back({c, -1, double(at(c).devices), at(c).state});
    }
    for (size_t c = 0; c < p.calls.size(); ++c) {
      if (p.calls[c].host || front[c].empty())
        continue;
      const Point &q = at(c);
      double h = home[p.calls[c].model];
      // The call holds its own weights instead of its model's resting shard
      // where the two overlap, on top of it elsewhere.
      if (resting - h + std::max(h, q.weights) + q.work > limit * gpus)
        return false;
      if (pick[c] < 0)
        continue;
      double d = double(q.devices), load = q.perGpu * d;
      for (const Rest &r : rest)
        if (r.call != c && r.model != p.calls[c].model)
          load += std::max(0.0, d + r.devices - gpus) * r.bytes / r.devices;
      if (load > limit * d)
        return false;
    }
    return true;
  }

  /// The longest run of picked calls that pairwise share a GPU: two calls
  /// on more GPUs together than the cluster has overlap somewhere, wherever
  /// they are placed, so they never run at the same time.
  double serialised() const {
    double most = 0;
    for (size_t x : order) {
      if (pick[x] < 0)
        continue;
      const Point &px = at(x);
      double sum = px.time;
      for (size_t c : order)
        if (c != x && pick[c] >= 0) {
          const Point &pc = at(c);
          if (pc.devices + px.devices > p.gpus &&
              (pc.devices > px.devices || (pc.devices == px.devices && c > x)))
            sum += pc.time;
        }
      most = std::max(most, sum);
    }
    return most;
  }

  /// max(cycle, area, serialised, window) with unpicked calls at their fastest
  /// and smallest (and left out of the serialised run).
  double bound() {
    double area = 0;
    for (size_t c = 0; c < p.calls.size(); ++c)
      if (!p.calls[c].host && !front[c].empty())
        area += at(c).area;
    double cycle = longestCycle(
        p, mc, dist,
        [&](size_t c) {
          return p.calls[c].host || front[c].empty() ? 0.0 : at(c).time;
        },
        [](size_t, size_t, double) { return 0.0; }, [](size_t) { return 0.0; });
    double window = longestWindow(
        p, [&](size_t c) { return at(c).time; },
        [&](size_t c) { return at(c).area; });
    return std::max({cycle, area, serialised(), window});
  }

  void dfs(size_t depth) {
    size_t c = order[depth];
    for (size_t k = 0; k < front[c].size(); ++k) {
      if (++nodes > nodeLimit) {
        aborted = true;
        break;
      }
      pick[c] = int(k);
      // With every call picked, the bound is the relaxed time itself.
      if (double b = bound(); b < best && fits()) {
        if (depth + 1 == order.size()) {
          best = b;
          bestPick = pick;
        } else {
          dfs(depth + 1);
        }
      }
      if (aborted)
        break;
    }
    pick[c] = -1;
  }
};

} // namespace

std::optional<double> plan::relaxedFloor(const Problem &p, int64_t nodeLimit,
                                         Assignment *witness) {
  Relaxed r(p, nodeLimit);
  if (!r.fits())
    return kInfTime; // not even the least of everything fits
  if (r.order.empty())
    r.best = r.bound(); // every call pinned or on the host
  else
    r.dfs(0);
  if (r.aborted)
    return std::nullopt;
  if (witness && !r.bestPick.empty()) {
    witness->assign(p.calls.size(), -1);
    for (size_t c = 0; c < p.calls.size(); ++c)
      if (!p.calls[c].host && !r.front[c].empty())
        (*witness)[c] = r.front[c][r.bestPick[c]].cand;
  }
  return r.best;
}
