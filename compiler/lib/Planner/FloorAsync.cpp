//===- FloorAsync.cpp - a floor under every asynchronous plan -------------===//
//
// simulate() prices a plan at the largest of its measured rate, the busiest
// GPU's call time and the GPU-seconds over the cluster (under staleness
// iterationBounds keeps only those two floors), whichever simulator runs:
// the asynchronous one when the generate owns a weight copy, else the
// synchronous one. This floor minimises, over one candidate per call, the
// largest of three quantities that lie under that price. Memory, transfers
// and reallocations are left out.
//
// Placement: the stale generate and its trainer (its model's last other
// call, whose layout decides the simulator and the update's cost) keep
// their candidates' exact meshes. Every other call keeps its time,
// GPU-seconds and GPU count, and which exact meshes it meets; meeting none,
// it lies in one run of the GPUs outside them. Meshes are runs of GPUs, and
// runs that meet pairwise share a GPU (intervals are Helly). Calls meet by
// construction, or when they need more GPUs together than those they may
// lie on.
//  - The busiest GPU: each call alone; each set of calls that meet
//    pairwise; the mean work over each union of pieces (the runs the exact
//    meshes' ends cut), in which a call has all its GPUs but those it may
//    have outside, and at least one where a mesh it meets lies inside.
//  - The GPU-seconds of all calls over the cluster.
//  - The measured rate, (iterEnd[to] - iterEnd[from]) / (to - from). Every
//    call starts no earlier than what its simulator waits for: its inputs,
//    its model's previous call; a running-ahead generate also its version's
//    weight update and its own previous batch; an update the trainer's last
//    call. Each GPU runs its work in issue order, so a call or update also
//    waits for the last one issued before it on a GPU they share; the
//    update holds both exact meshes. Iteration `from` ends with a call that
//    has no successor in it, so the rate is at least, over those calls X,
//    the longest path from X's end to an end in iteration `to`, over
//    to - from.
// Every term grows with a call's time, GPU-seconds and GPU count, so each
// other call needs only its Pareto front of the three, searched by branch
// and bound.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/Planner/Planner.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/bit.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <tuple>

using namespace rlhfc;
using namespace rlhfc::plan;

namespace {

using Mask = uint64_t; ///< a set of calls, the weight update as call n

/// A simulator's unrolled precedence graph: node b after node a means b
/// starts no earlier than a ends. Nodes come in issue order, so every edge
/// points forward; `last` gives, per node, the latest node of each call
/// issued before it, to wait for where the two share a GPU.
struct Chain {
  struct Node {
    int call = 0; ///< n: a weight update
    int iteration = 0;
    bool counted = false; ///< a model call: its end counts for its iteration
    std::vector<int> preds, last;
  };
  std::vector<Node> nodes;
  int from = 0, to = 0;   ///< the rate is measured between their ends
  std::vector<int> sinks; ///< the calls that may end iteration `from`
  std::vector<int> ends;  ///< the calls of iteration `to`

  int add(int call, int iteration, bool counted) {
    nodes.push_back({call, iteration, counted, {}, {}});
    return int(nodes.size()) - 1;
  }

  void close(size_t calls, int first, int final) {
    from = first;
    to = final;
    std::vector<int> seen(calls + 1, -1);
    for (size_t v = 0; v < nodes.size(); ++v) {
      nodes[v].last = seen;
      seen[nodes[v].call] = int(v);
      if (nodes[v].counted && nodes[v].iteration == to)
        ends.push_back(int(v));
      if (!nodes[v].counted || nodes[v].iteration != from)
        continue;
      // A call with a successor in its iteration never ends it alone.
      std::vector<char> reach(nodes.size(), 0);
      reach[v] = 1;
      bool alone = true;
      for (size_t u = v + 1; u < nodes.size() && alone; ++u) {
        for (int q : nodes[u].preds)
          reach[u] |= reach[q];
        alone = !(reach[u] && nodes[u].counted && nodes[u].iteration == from);
      }
      if (alone)
        sinks.push_back(int(v));
    }
  }

  /// The least rate with call c taking time[c] (the update time[n]) and
  /// waiting for the calls in shares[c] on a common GPU.
  double rate(const Problem &p, llvm::ArrayRef<double> time,
              llvm::ArrayRef<Mask> shares, std::vector<double> &dist) const {
    double least = kInfTime;
    for (int x : sinks) {
      dist.assign(nodes.size(), -1.0);
      dist[x] = 0;
      bool alone = true;
      for (size_t v = size_t(x) + 1; v < nodes.size() && alone; ++v) {
        const Node &w = nodes[v];
        double ready = -1;
        for (int q : w.preds)
          ready = std::max(ready, dist[q]);
        for (Mask s = shares[w.call]; s; s &= s - 1)
          if (int q = w.last[llvm::countr_zero(s)]; q >= 0)
            ready = std::max(ready, dist[q]);
        if (ready < 0)
          continue;
        bool host = size_t(w.call) < p.calls.size() && p.calls[w.call].host;
        dist[v] = ready + (host ? p.calls[w.call].hostTime : time[w.call]);
        alone = !(w.counted && w.iteration == from);
      }
      if (!alone)
        continue; // a later call ends the iteration
      double longest = 0;
      for (int y : ends)
        longest = std::max(longest, dist[y]);
      least = std::min(least, longest);
    }
    return to > from && least < kInfTime ? least / double(to - from) : 0.0;
  }
};

/// Adds call c of iteration `it` after its inputs (`at`: the latest node of
/// each call) and its model's previous call (`last`).
int addCall(const Problem &p, Chain &ch, size_t c, int it,
            llvm::ArrayRef<int> at, std::vector<int> &last) {
  int v = ch.add(int(c), it, !p.calls[c].host);
  for (auto [d, bytes] : p.calls[c].deps)
    if (at[d] >= 0)
      ch.nodes[v].preds.push_back(at[d]);
  if (!p.calls[c].host) {
    int &prev = last[p.calls[c].model];
    if (prev >= 0)
      ch.nodes[v].preds.push_back(prev);
    prev = v;
  }
  return v;
}

/// Simulate.cpp's graph: rounds of all calls in program order (a producer
/// later in program order is read from the round before).
Chain syncChain(const Problem &p, int iterations) {
  Chain ch;
  std::vector<int> last(p.models.size(), -1), at(p.calls.size(), -1);
  for (int it = 0; it < iterations; ++it)
    for (size_t c = 0; c < p.calls.size(); ++c)
      at[c] = addCall(p, ch, c, it, at, last);
  ch.close(p.calls.size(), 0, iterations - 1);
  return ch;
}

/// SimulateAsync.cpp's graph with `gen` owning its weights: round r issues
/// the generate of iteration r + k (of 0..k in round 0), after its version's
/// update and its previous batch, then the other calls of iteration r
/// (unissued inputs read as 0); after `trainer`, the update.
Chain asyncChain(const Problem &p, size_t gen, size_t trainer, int iterations) {
  Chain ch;
  const size_t n = p.calls.size();
  const int k = int(p.staleness), total = iterations + 2 * k;
  std::vector<std::vector<int>> at(total, std::vector<int>(n, -1));
  std::vector<int> last(p.models.size(), -1), update(total, -1);
  int prevGen = -1;
  for (int r = 0; r < total; ++r) {
    for (int it = r == 0 ? 0 : r + k; it <= r + k && it < total; ++it) {
      int v = ch.add(int(gen), it, true);
      if (prevGen >= 0)
        ch.nodes[v].preds.push_back(prevGen);
      if (it - k > 0)
        ch.nodes[v].preds.push_back(update[it - k - 1]);
      at[it][gen] = prevGen = v;
    }
    for (size_t c = 0; c < n; ++c) {
      if (c == gen)
        continue;
      int v = at[r][c] = addCall(p, ch, c, r, at[r], last);
      if (c == trainer) {
        int u = ch.add(int(n), r, false);
        ch.nodes[u].preds = {v, prevGen};
        update[r] = last[p.calls[c].model] = u;
      }
    }
  }
  ch.close(n, k, iterations + k - 1);
  return ch;
}

/// A call's candidates as the relaxation sees them: a Pareto point, and
/// where it lies relative to the exact meshes (a Class).
struct Option {
  double time = 0, area = 0; ///< area: GPU-seconds
  int64_t devices = 0;
  int cls = 0;
};

/// Where a call may lie: the exact meshes it meets (a bit each) and the
/// GPUs it may cover, the runs outside the meshes it does not meet that
/// touch every mesh it meets (meeting none: one run outside them all).
struct Class {
  unsigned meets = 0, pieces = 0;
  int64_t widest = 0; ///< its longest run
};

/// A union of zones (the exact meshes' overlaps and remainders, the runs
/// outside them): its size, each exact mesh's GPUs in it, and per class
/// the GPUs outside it and whether a mesh the class meets lies inside.
struct Region {
  int64_t size = 0;
  std::vector<int64_t> exactIn, classOut;
  std::vector<char> meetsInside;
};

struct Relaxed {
  const Problem &p;
  const size_t n;
  const int64_t gpus;
  std::vector<size_t> exact; ///< the generate and its trainer, if any
  std::vector<std::vector<Option>> front;
  std::vector<size_t> order; ///< the other calls with a choice
  std::optional<Chain> sync, async;
  // The search's state: exact meshes, classes, regions, options, picks.
  std::vector<const Candidate *> at;
  std::vector<Class> classes;
  std::vector<std::vector<int64_t>> together; ///< |A ∪ B| per class pair
  std::vector<Region> regions;
  bool owns = false;
  std::vector<std::vector<Option>> opts;
  std::vector<int> pick;
  std::vector<double> time, dist;
  std::vector<Mask> shares;
  double best = kInfTime;
  AsyncFloor out;
  int64_t nodes = 0, nodeLimit;
  bool aborted = false;

  Relaxed(const Problem &p, int64_t nodeLimit, int iterations)
      : p(p), n(p.calls.size()), gpus(std::max<int64_t>(1, p.gpus)), front(n),
        opts(n), pick(n, -1), time(n + 1), shares(n + 1), nodeLimit(nodeLimit) {
    std::vector<size_t> gens;
    for (size_t c = 0; c < n; ++c)
      if (!p.calls[c].host && p.calls[c].stale > 0 && p.staleness > 0)
        gens.push_back(c);
    int trainer = -1;
    if (gens.size() == 1) {
      exact.push_back(gens[0]);
      for (size_t c = 0; c < n; ++c)
        if (c != gens[0] && !p.calls[c].host &&
            p.calls[c].model == p.calls[gens[0]].model)
          trainer = int(c);
      if (trainer >= 0 && !p.cands[trainer].empty())
        exact.push_back(size_t(trainer));
    }
    for (size_t c = 0; c < n; ++c) {
      if (p.calls[c].host || p.cands[c].empty() || llvm::is_contained(exact, c))
        continue;
      std::vector<Option> pts;
      for (const Candidate &x : p.cands[c])
        pts.push_back({x.time, x.time * double(x.devices), x.devices});
      llvm::sort(pts, [](const Option &l, const Option &r) {
        return std::tie(l.time, l.area, l.devices) <
               std::tie(r.time, r.area, r.devices);
      });
      for (const Option &q : pts)
        if (llvm::none_of(front[c], [&](const Option &f) {
              return f.area <= q.area && f.devices <= q.devices;
            }))
          front[c].push_back(q);
      order.push_back(c);
    }
    // Large calls first: their picks move the bound most.
    llvm::stable_sort(order, [&](size_t l, size_t r) {
      return p.leastArea(l) > p.leastArea(r);
    });
    // Masks hold the calls and the update; with more than one running-ahead
    // generate no chain is known.
    if (iterations < 2 || gens.size() > 1 || n >= 64)
      return;
    sync = syncChain(p, iterations);
    if (exact.size() == 2 && llvm::none_of(p.calls[gens[0]].deps, [&](auto d) {
          return !p.calls[d.first].host;
        }))
      async = asyncChain(p, gens[0], size_t(trainer), iterations);
  }

  static int64_t overlap(const Candidate &x, const Candidate &y) {
    return std::max<int64_t>(
        0, std::min(x.s.firstGpu + x.devices, y.s.firstGpu + y.devices) -
               std::max(x.s.firstGpu, y.s.firstGpu));
  }

  /// Which calls share a GPU for certain (the update's mesh: both exact
  /// ones), given the picks so far.
  void shared() {
    std::fill(shares.begin(), shares.end(), 0);
    if (n >= 64)
      return;
    auto share = [&](size_t x, size_t y) {
      shares[x] |= Mask(1) << y;
      shares[y] |= Mask(1) << x;
    };
    if (owns)
      for (size_t e : exact)
        share(e, n);
    if (at.size() == 2 && overlap(*at[0], *at[1]) > 0)
      share(exact[0], exact[1]);
    for (size_t i = 0; i < order.size(); ++i) {
      size_t c = order[i];
      if (pick[c] < 0)
        continue;
      const Option &o = opts[c][pick[c]];
      for (size_t j = 0; j < at.size(); ++j)
        if (classes[o.cls].meets >> j & 1)
          share(c, exact[j]);
      if (owns && classes[o.cls].meets)
        share(c, n);
      for (size_t j = 0; j < i; ++j) {
        size_t d = order[j];
        if (pick[d] >= 0 && o.devices + opts[d][pick[d]].devices >
                                together[o.cls][opts[d][pick[d]].cls])
          share(c, d);
      }
    }
  }

  /// The heaviest set of calls that share a GPU pairwise.
  double heaviestSet() const {
    std::vector<size_t> in;
    for (size_t c = 0; c < n; ++c)
      if ((shares[c] & ~(Mask(1) << n)) != 0)
        in.push_back(c);
    double most = 0;
    std::function<void(size_t, Mask, double)> grow = [&](size_t i, Mask set,
                                                         double sum) {
      most = std::max(most, sum);
      for (size_t j = i; j < in.size(); ++j)
        if ((shares[in[j]] & set) == set)
          grow(j + 1, set | Mask(1) << in[j], sum + time[in[j]]);
    };
    grow(0, 0, 0);
    return most;
  }

  struct Terms {
    double busiest = 0, area = 0, rate = 0;
    double max() const { return std::max({busiest, area, rate}); }
  };

  /// The terms with unpicked calls at their fastest and least GPU-seconds,
  /// placed nowhere; the rate only when the others stay under `best`.
  Terms bound() {
    Terms t;
    double area = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      size_t c = exact[i];
      time[c] = i < at.size() ? at[i]->time : p.fastestTime(c);
      area += i < at.size() ? time[c] * double(at[i]->devices) : p.leastArea(c);
    }
    for (size_t c : order) {
      time[c] = pick[c] < 0 ? p.fastestTime(c) : opts[c][pick[c]].time;
      area += pick[c] < 0 ? p.leastArea(c) : opts[c][pick[c]].area;
    }
    for (size_t c = 0; c < n; ++c)
      if (!p.calls[c].host && !p.cands[c].empty())
        t.busiest = std::max(t.busiest, time[c]);
    // Each region's mean work: a call has its GPUs outside the region among
    // those its class may cover, and one in a mesh it meets.
    for (const Region &z : regions) {
      double work = 0;
      for (size_t j = 0; j < at.size(); ++j)
        work += time[exact[j]] * double(z.exactIn[j]);
      for (size_t c : order)
        if (pick[c] >= 0) {
          const Option &o = opts[c][pick[c]];
          work +=
              o.time * double(std::max<int64_t>(z.meetsInside[o.cls],
                                                o.devices - z.classOut[o.cls]));
        }
      t.busiest = std::max(t.busiest, work / double(z.size));
    }
    shared();
    t.busiest = std::max(t.busiest, heaviestSet());
    t.area = area / double(gpus);
    if (t.max() >= best || !sync)
      return t;
    // Until the trainer is placed either simulator may price the plan.
    bool placed = at.size() == exact.size();
    double r = kInfTime;
    if (async && (!placed || owns)) {
      time[n] = owns
                    ? p.reallocTime(p.calls[exact[0]].model, at[1]->s, at[0]->s)
                    : 0.0;
      r = async->rate(p, time, shares, dist);
    }
    if (!placed || !owns)
      r = std::min(r, sync->rate(p, time, shares, dist));
    t.rate = r;
    return t;
  }

  /// Places the exact meshes `at`: the classes, the regions, and every
  /// other call's options. GPUs fall into at most 2m + 1 pieces, runs alike
  /// in which of the m meshes hold them; classes and regions are sets of
  /// pieces.
  void place() {
    owns = at.size() == 2 && async && !at[0]->s.offload && !at[1]->s.offload &&
           !cost::sameLayout(at[0]->s, at[1]->s);
    const size_t m = at.size();
    std::vector<int64_t> cuts = {0, gpus};
    for (const Candidate *x : at)
      cuts.insert(cuts.end(), {x->s.firstGpu, x->s.firstGpu + x->devices});
    llvm::sort(cuts);
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<int64_t> size;
    std::vector<unsigned> held; ///< per piece, the meshes holding it
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      size.push_back(cuts[i + 1] - cuts[i]);
      held.push_back(0);
      for (size_t j = 0; j < m; ++j)
        held.back() |= unsigned(cuts[i] >= at[j]->s.firstGpu &&
                                cuts[i] < at[j]->s.firstGpu + at[j]->devices)
                       << j;
    }
    const size_t pieces = size.size();
    auto sizeOf = [&](unsigned set) {
      int64_t sum = 0;
      for (size_t i = 0; i < pieces; ++i)
        sum += (set >> i & 1) * size[i];
      return sum;
    };
    classes.clear();
    for (unsigned meets = 0; meets < (1u << m); ++meets) {
      unsigned cls = 0, touched = 0;
      int64_t widest = 0, run = 0;
      // Runs of pieces held by no mesh outside `meets`: without meshes, a
      // class each; with, those that touch all of them, as one class.
      unsigned kept = 0;
      for (size_t i = 0; i <= pieces; ++i) {
        bool allowed = i < pieces && (held[i] & ~meets) == 0;
        if (allowed) {
          cls |= 1u << i;
          touched |= held[i];
          run += size[i];
          continue;
        }
        if (run > 0 && (touched & meets) == meets) {
          if (!meets)
            classes.push_back({0, cls, run});
          kept |= cls;
          widest = std::max(widest, run);
        }
        cls = touched = 0;
        run = 0;
      }
      if (meets && kept)
        classes.push_back({meets, kept, widest});
    }
    together.assign(classes.size(), std::vector<int64_t>(classes.size()));
    for (size_t a = 0; a < classes.size(); ++a)
      for (size_t b = 0; b < classes.size(); ++b)
        together[a][b] = sizeOf(classes[a].pieces | classes[b].pieces);
    regions.clear();
    for (unsigned set = 1; set < (1u << pieces); ++set) {
      Region z;
      z.size = sizeOf(set);
      for (size_t j = 0; j < m; ++j) {
        unsigned in = 0;
        for (size_t i = 0; i < pieces; ++i)
          if (held[i] >> j & 1)
            in |= set & 1u << i;
        z.exactIn.push_back(sizeOf(in));
      }
      for (const Class &k : classes) {
        z.classOut.push_back(sizeOf(k.pieces & ~set));
        bool inside = false;
        for (size_t j = 0; j < m; ++j)
          inside |= (k.meets >> j & 1) && z.exactIn[j] == at[j]->devices;
        z.meetsInside.push_back(inside);
      }
      regions.push_back(std::move(z));
    }
    for (size_t c : order) {
      opts[c].clear();
      for (Option o : front[c])
        for (o.cls = 0; o.cls < int(classes.size()); ++o.cls)
          if (o.devices <= classes[o.cls].widest)
            opts[c].push_back(o);
    }
  }

  void record(const Terms &t) {
    best = t.max();
    out = {best, -1, -1, t.busiest, t.area, t.rate};
    for (size_t i = 0; i < at.size(); ++i)
      (i == 0 ? out.generator : out.trainer) =
          int(at[i] - p.cands[exact[i]].data());
  }

  void dfs(size_t depth) {
    if (depth == order.size()) {
      if (Terms t = bound(); t.max() < best)
        record(t);
      return;
    }
    size_t c = order[depth];
    std::vector<std::pair<double, int>> kids;
    for (size_t i = 0; i < opts[c].size() && !aborted; ++i) {
      aborted = ++nodes > nodeLimit;
      pick[c] = int(i);
      if (double b = bound().max(); b < best)
        kids.push_back({b, int(i)});
    }
    llvm::sort(kids);
    for (auto [b, i] : kids) {
      if (aborted || b >= best)
        break;
      pick[c] = i;
      dfs(depth + 1);
    }
    pick[c] = -1;
  }

  /// Places the exact call `exact[at.size()]` on each of its candidates,
  /// those with the least bound first, and searches the rest.
  void placeNext() {
    if (at.size() == exact.size()) {
      place();
      if (bound().max() < best)
        dfs(0);
      return;
    }
    const std::vector<Candidate> &cs = p.cands[exact[at.size()]];
    std::vector<std::pair<double, int>> xs;
    at.push_back(nullptr);
    for (size_t i = 0; i < cs.size() && !aborted; ++i) {
      aborted = ++nodes > nodeLimit;
      at.back() = &cs[i];
      place();
      xs.push_back({bound().max(), int(i)});
    }
    llvm::sort(xs);
    for (auto [b, i] : xs) {
      if (aborted || b >= best)
        break;
      at.back() = &cs[i];
      placeNext();
    }
    at.pop_back();
  }
};

} // namespace

std::optional<AsyncFloor> plan::asyncFloor(const Problem &p, int64_t nodeLimit,
                                           int iterations) {
  Relaxed r(p, nodeLimit, iterations);
  r.placeNext();
  if (r.aborted)
    return std::nullopt;
  return r.out;
}
