//===- Baselines.cpp - the heuristic, colocated and separated plans -------===//
//
// The three baselines the search starts from and is compared with, and
// the placement rule they share: given each call's mesh, the fastest
// strategies there that fit together.
//
//===----------------------------------------------------------------------===//

#include "Baselines.h"

#include <algorithm>

using namespace rlhfc;
using namespace rlhfc::plan;

/// The smaller working set, and offloaded (no resting weights) on a tie.
bool plan::detail::smallerFootprint(const Candidate &x, const Candidate &y) {
  if (x.mem.total() != y.mem.total())
    return x.mem.total() < y.mem.total();
  return x.s.offload && !y.s.offload;
}

Assignment plan::detail::emptyAssignment(const Problem &p) {
  Assignment a(p.calls.size(), -1);
  for (size_t c = 0; c < p.calls.size(); ++c)
    if (!p.calls[c].host)
      a[c] = 0;
  return a;
}

/// Given each free call's mesh, the fastest strategies there that fit
/// together: start every call at its smallest footprint, then move each, in
/// program order, to the fastest candidate that keeps everything in memory.
/// Baselines never offload; search starts may.
std::optional<Assignment> plan::detail::fastestFitting(
    const Problem &p, const std::vector<std::pair<int64_t, int64_t>> &meshOf,
    bool offload) {
  Assignment a = emptyAssignment(p);
  std::vector<std::vector<int>> onMesh(p.calls.size());
  for (size_t c = 0; c < p.calls.size(); ++c) {
    if (p.calls[c].host || p.calls[c].pinned)
      continue;
    for (int k = 0; k < int(p.cands[c].size()); ++k) {
      const Candidate &x = p.cands[c][k];
      if (x.s.firstGpu == meshOf[c].first && x.devices == meshOf[c].second &&
          (offload || !x.s.offload))
        onMesh[c].push_back(k);
    }
    if (onMesh[c].empty())
      return std::nullopt;
    a[c] = *std::min_element(
        onMesh[c].begin(), onMesh[c].end(), [&](int x, int y) {
          return smallerFootprint(p.cands[c][x], p.cands[c][y]);
        });
  }
  if (simulate(p, a).oom)
    return std::nullopt;
  for (size_t c = 0; c < p.calls.size(); ++c) {
    std::vector<int> &ks = onMesh[c];
    std::sort(ks.begin(), ks.end(), [&](int x, int y) {
      return p.cands[c][x].time < p.cands[c][y].time;
    });
    for (int k : ks) {
      if (p.cands[c][k].time >= p.cands[c][a[c]].time)
        break;
      int old = a[c];
      a[c] = k;
      if (!simulate(p, a).oom)
        break;
      a[c] = old;
    }
  }
  return a;
}

/// ReaLHF's symmetric Megatron baseline: every call on every GPU, one
/// (tp, pp) per model for all its calls: the widest tensor parallelism a
/// node and the heads allow, and the fewest pipeline stages with which all
/// co-resident models fit (growing the largest model's pp first); data
/// parallel over the rest. Generation runs in that layout too, its pipeline
/// stages in turn (the runtime's pipelined generation). With `savers`, each
/// call takes the smallest sp that fits, and an overflowing model first moves
/// its largest call to a candidate with a smaller footprint at the same
/// (tp, pp) (smallest sp, then fastest: ZeRO, recomputation, more
/// micro-batches or sp), deepening its pipeline only when none is left; a
/// model that can do neither passes the turn to the next heaviest.
std::optional<Assignment> plan::detail::heuristic(const Problem &p,
                                                  bool savers) {
  size_t nm = p.models.size();
  std::vector<std::vector<size_t>> callsOf(nm);
  for (size_t c = 0; c < p.calls.size(); ++c)
    if (!p.calls[c].host)
      callsOf[p.calls[c].model].push_back(c);
  // With savers, sequence parallelism only as far as memory requires: the
  // smallest sp first, then the fastest.
  auto before = [&](const Candidate &x, const Candidate &y) {
    if (savers && x.s.sp != y.s.sp)
      return x.s.sp < y.s.sp;
    return x.time < y.time;
  };
  // For a model at (tp, pp): each call's fastest full-mesh candidate.
  auto pick = [&](size_t m, int64_t tp,
                  int64_t pp) -> std::optional<std::vector<int>> {
    std::vector<int> out;
    for (size_t c : callsOf[m]) {
      if (p.calls[c].pinned) {
        out.push_back(0);
        continue;
      }
      int64_t callPp = pp;
      int best = -1;
      for (int k = 0; k < int(p.cands[c].size()); ++k) {
        const Candidate &x = p.cands[c][k];
        if (x.devices == p.gpus && x.s.tp == tp && x.s.pp == callPp &&
            !x.s.offload && (best < 0 || before(x, p.cands[c][best])))
          best = k;
      }
      if (best < 0)
        return std::nullopt;
      out.push_back(best);
    }
    return out;
  };
  std::vector<int64_t> tp(nm, 0), pp(nm, 1);
  Assignment a = emptyAssignment(p);
  auto set = [&](size_t m) {
    // The smallest pp >= pp[m] that gives every call a candidate.
    for (int64_t q = pp[m]; q <= p.gpus / tp[m]; ++q)
      if (auto ks = pick(m, tp[m], q)) {
        pp[m] = q;
        for (size_t i = 0; i < callsOf[m].size(); ++i)
          a[callsOf[m][i]] = (*ks)[i];
        return true;
      }
    return false;
  };
  for (size_t m = 0; m < nm; ++m) {
    bool ok = false;
    for (int64_t t = p.hw.gpusPerNode; t >= 1 && !ok; t /= 2) {
      tp[m] = t;
      pp[m] = 1;
      ok = set(m);
    }
    if (!ok)
      return std::nullopt;
  }
  // Whether model m's largest call found a lighter candidate at its (tp, pp).
  auto lighten = [&](size_t m) {
    size_t big = callsOf[m].front();
    for (size_t c : callsOf[m])
      if (p.cands[c][a[c]].mem.total() > p.cands[big][a[big]].mem.total())
        big = c;
    if (p.calls[big].pinned)
      return false;
    const Candidate &now = p.cands[big][a[big]];
    int best = -1;
    for (int k = 0; k < int(p.cands[big].size()); ++k) {
      const Candidate &x = p.cands[big][k];
      if (x.devices == p.gpus && x.s.tp == tp[m] && x.s.pp == pp[m] &&
          !x.s.offload && x.mem.total() < now.mem.total() &&
          (best < 0 || before(x, p.cands[big][best])))
        best = k;
    }
    if (best < 0)
      return false;
    a[big] = best;
    return true;
  };
  // Co-resident models overflow: pipeline the heaviest model further. With
  // savers, a model that can neither lighten nor deepen passes the turn to
  // the next heaviest, as an engineer would, rather than giving up.
  for (int guard = 0; guard < 256; ++guard) {
    SimResult r = simulate(p, a);
    if (!r.oom)
      return a;
    std::vector<std::pair<double, size_t>> order; // (bytes, model)
    for (size_t m = 0; m < nm; ++m) {
      double bytes = 0;
      for (size_t c : callsOf[m])
        bytes = std::max(bytes, p.cands[c][a[c]].mem.total());
      if (pp[m] * tp[m] < p.gpus || savers)
        order.push_back({bytes, m});
    }
    std::stable_sort(
        order.begin(), order.end(),
        [](const auto &x, const auto &y) { return x.first > y.first; });
    if (!savers && !order.empty())
      order.resize(1);
    bool moved = false;
    for (auto [bytes, m] : order) {
      if (savers && lighten(m)) {
        moved = true;
        break;
      }
      if (pp[m] * tp[m] >= p.gpus)
        continue;
      int64_t was = pp[m]++;
      if (set(m)) {
        moved = true;
        break;
      }
      pp[m] = was;
    }
    if (!moved)
      return std::nullopt;
  }
  return std::nullopt;
}

/// verl-like: everything on all GPUs, each call resharded to its fastest
/// strategy there.
std::optional<Assignment> plan::detail::colocated(const Problem &p) {
  return fastestFitting(p, std::vector<std::pair<int64_t, int64_t>>(
                               p.calls.size(), {int64_t(0), p.gpus}));
}

/// OpenRLHF-like: disjoint GPU groups per model, sized by parameters
/// (trainable models weigh triple for gradients and optimizer state).
std::optional<Assignment> plan::detail::separated(const Problem &p) {
  size_t nm = p.models.size();
  std::vector<double> weight(nm);
  double total = 0;
  for (size_t m = 0; m < nm; ++m) {
    weight[m] = p.models[m].arch.totalParams * (p.models[m].trainable ? 3 : 1);
    total += weight[m];
  }
  // Power-of-two shares, then grow the most loaded group while GPUs remain.
  std::vector<int64_t> size(nm, 1);
  for (size_t m = 0; m < nm; ++m) {
    double want = p.gpus * weight[m] / total;
    while (size[m] * 2 <= want)
      size[m] *= 2;
  }
  auto used = [&] {
    int64_t s = 0;
    for (int64_t x : size)
      s += x;
    return s;
  };
  if (used() > p.gpus)
    return std::nullopt;
  for (;;) {
    int grow = -1;
    for (size_t m = 0; m < nm; ++m)
      if (used() + size[m] <= p.gpus &&
          (grow < 0 || weight[m] / size[m] > weight[grow] / size[grow]))
        grow = int(m);
    if (grow < 0)
      break;
    size[grow] *= 2;
  }
  // Largest first keeps every group aligned.
  std::vector<size_t> order(nm);
  for (size_t m = 0; m < nm; ++m)
    order[m] = m;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return size[x] > size[y]; });
  std::vector<int64_t> first(nm);
  int64_t at = 0;
  for (size_t m : order) {
    first[m] = at;
    at += size[m];
  }
  std::vector<std::pair<int64_t, int64_t>> meshOf(p.calls.size(), {0, 0});
  for (size_t c = 0; c < p.calls.size(); ++c)
    if (!p.calls[c].host)
      meshOf[c] = {first[p.calls[c].model], size[p.calls[c].model]};
  return fastestFitting(p, meshOf);
}
