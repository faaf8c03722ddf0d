//===- Search.cpp - exhaustive search and annealing -----------------------===//

#include "Anneal.h"
#include "Baselines.h"
#include "Hierarchy.h"

#include "mlir/IR/Builders.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <random>

using namespace rlhfc;
using namespace rlhfc::plan;
using namespace rlhfc::plan::detail;
namespace r = mlir::rlhf;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double score(const Problem &p, const Assignment &a) {
  SimResult s = simulate(p, a);
  return s.oom ? kInf : s.iterationTime;
}

std::vector<size_t> freeCalls(const Problem &p) {
  std::vector<size_t> out;
  for (size_t c = 0; c < p.calls.size(); ++c)
    if (!p.calls[c].host && !p.calls[c].pinned)
      out.push_back(c);
  return out;
}

/// Every mesh some call has candidates on, and per call and mesh those
/// candidates, fastest first.
struct MeshIndex {
  std::vector<std::pair<int64_t, int64_t>> meshes;
  std::vector<std::vector<std::vector<int>>> on; ///< [call][mesh]

  explicit MeshIndex(const Problem &p) : on(p.calls.size()) {
    std::map<std::pair<int64_t, int64_t>, size_t> index;
    for (size_t c = 0; c < p.calls.size(); ++c)
      for (const Candidate &k : p.cands[c])
        if (index.try_emplace({k.s.firstGpu, k.devices}, meshes.size()).second)
          meshes.push_back({k.s.firstGpu, k.devices});
    for (size_t c = 0; c < p.calls.size(); ++c) {
      on[c].resize(meshes.size());
      for (int k = 0; k < int(p.cands[c].size()); ++k) {
        const Candidate &x = p.cands[c][k];
        on[c][index[{x.s.firstGpu, x.devices}]].push_back(k);
      }
      for (auto &ks : on[c])
        std::stable_sort(ks.begin(), ks.end(), [&](int x, int y) {
          return p.cands[c][x].time < p.cands[c][y].time;
        });
    }
  }
};

/// The mesh inside `side` of call `c`'s fastest candidate there: on 11 of
/// 16 nodes a generation's best layout may use only 8 of them. {0, 0} when
/// there is none.
std::pair<int64_t, int64_t> fastestWithin(const Problem &p, size_t c,
                                          std::pair<int64_t, int64_t> side) {
  const Candidate *best = nullptr;
  for (const Candidate &k : p.cands[c])
    if (k.s.firstGpu >= side.first &&
        k.s.firstGpu + k.devices <= side.first + side.second &&
        (!best || k.time < best->time))
      best = &k;
  return best ? std::make_pair(best->s.firstGpu, best->devices)
              : std::make_pair<int64_t, int64_t>(0, 0);
}

/// Starts where calls share or split the cluster: each free call on all
/// GPUs or on one side of a split, at its fastest fitting strategy there
/// (whole models together, when there are too many calls to combine one by
/// one). Splits fall on every node boundary (one node: its halves), since
/// the best split plans give the side that generates more GPUs than the
/// side that trains the other model. Single-call moves rarely reach such
/// plans: moving one call of a model off its mesh first adds
/// reallocations, and two trainings that would overlap on two halves gain
/// nothing until both have moved.
std::vector<Assignment> partitionStarts(const Problem &p) {
  std::vector<Assignment> out;
  std::vector<size_t> free = freeCalls(p);
  // A unit takes one side: a call, or every call of a model.
  const bool perCall = free.size() <= 7;
  const size_t units = perCall ? free.size() : p.models.size();
  if (p.gpus < 2 || units == 0 || units > 7)
    return out;
  std::vector<size_t> unitOf(p.calls.size(), 0);
  for (size_t i = 0; i < free.size(); ++i)
    unitOf[free[i]] = perCall ? i : size_t(p.calls[free[i]].model);
  std::vector<int64_t> cuts;
  // Between blocks of nodes, where meshes of whole blocks meet.
  const int64_t block = detail::blockNodes(p);
  if (p.nodes > 1) {
    for (int64_t n = block; n < p.nodes; n += block)
      cuts.push_back(n * p.hw.gpusPerNode);
  } else {
    cuts.push_back(p.gpus / 2);
    // A node of 12 halves into 6s, where few strategies divide the heads;
    // its power-of-two parts (8 + 4, 4 + 8) are where fast meshes are.
    int64_t pow2 = 1;
    while (pow2 * 2 < p.gpus)
      pow2 *= 2;
    if (pow2 * 2 != p.gpus && pow2 != p.gpus / 2) {
      cuts.push_back(pow2);
      cuts.push_back(p.gpus - pow2);
    }
  }
  size_t combos = 1;
  for (size_t u = 0; u < units; ++u)
    combos *= 3;
  for (int64_t cut : cuts) {
    const std::pair<int64_t, int64_t> choice[3] = {
        {0, p.gpus}, {0, cut}, {cut, p.gpus - cut}};
    // Each call's mesh on each side, found once per cut, not per combination.
    std::vector<std::array<std::pair<int64_t, int64_t>, 3>> within(
        p.calls.size());
    for (size_t c : free)
      for (int k = 0; k < 3; ++k)
        within[c][k] = fastestWithin(p, c, choice[k]);
    for (size_t code = 0; code < combos; ++code) {
      std::vector<int> side(units);
      for (size_t u = 0, x = code; u < units; ++u, x /= 3)
        side[u] = int(x % 3);
      std::vector<std::pair<int64_t, int64_t>> meshOf(p.calls.size(), {0, 0});
      for (size_t c : free)
        meshOf[c] = within[c][side[unitOf[c]]];
      if (auto a = fastestFitting(p, meshOf, /*offload=*/true))
        out.push_back(std::move(*a));
    }
  }
  return out;
}

/// The most any GPU's predicted peak exceeds the usable memory (<= 0: fits).
double overflow(const Problem &p, const Assignment &a) {
  SimResult r = simulate(p, a, 1);
  double worst = -kInf;
  for (double b : r.peakMemory)
    worst = std::max(worst, b - p.memoryLimit);
  return worst;
}

/// Steepest descent on the overflow by single-call moves, until the plan
/// fits or no move shrinks it. Smallest footprints per call need not fit
/// together: the resting weights depend on where every model's calls run.
Assignment reduceOverflow(const Problem &p, Assignment a,
                          const std::vector<size_t> &free, SearchStats &stats) {
  double cur = overflow(p, a);
  while (cur > 0) {
    Assignment next = a;
    double nextOver = cur;
    for (size_t c : free)
      for (int k = 0; k < int(p.cands[c].size()); ++k) {
        if (k == a[c])
          continue;
        Assignment t = a;
        t[c] = k;
        double o = overflow(p, t);
        ++stats.evaluated;
        if (o < nextOver) {
          nextOver = o;
          next = std::move(t);
        }
      }
    if (nextOver >= cur)
      break;
    a = std::move(next);
    cur = nextOver;
  }
  return a;
}

} // namespace

/// Simulated annealing with the Metropolis rule on the real-valued change
/// (ReaLHF integer-divides it, which turns its search into a random walk).
/// Moves change one call's candidate (one of its fastest, one on a random
/// mesh of its own, or any), or move all free calls of one model to another
/// mesh at once. Drawing the mesh first matters at scale: most candidates
/// span the whole cluster, so uniform draws seldom leave it. Restarts begin
/// from the best distinct starts (baselines and partitions), the last from the
/// best plan so far. Deterministic for a seed: the budget counts evaluations,
/// not seconds.
std::optional<Assignment>
detail::anneal(const Problem &p, const SearchOptions &o, SearchStats &stats,
               const Assignment *seed, const SeenFn &seen) {
  std::vector<size_t> free = freeCalls(p);
  auto score = [&](const Assignment &a) {
    double s = ::score(p, a);
    if (seen && s < kInf)
      seen(a, s);
    return s;
  };
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);

  std::vector<std::pair<double, Assignment>> starts;
  auto consider = [&](std::optional<Assignment> a) {
    if (!a)
      return;
    double s = score(*a);
    ++stats.evaluated;
    if (s < kInf)
      starts.push_back({s, std::move(*a)});
  };
  if (seed)
    consider(*seed);
  consider(heuristic(p));
  consider(colocated(p));
  consider(separated(p));
  for (Assignment &a : partitionStarts(p))
    consider(std::move(a));
  if (starts.empty()) {
    // Nothing fits yet: start from each call's smallest-memory candidate and
    // descend on the overflow until the plan fits.
    Assignment a = emptyAssignment(p);
    for (size_t c : free) {
      int best = 0;
      for (int k = 0; k < int(p.cands[c].size()); ++k)
        if (smallerFootprint(p.cands[c][k], p.cands[c][best]))
          best = k;
      a[c] = best;
    }
    a = reduceOverflow(p, std::move(a), free, stats);
    starts.push_back({score(a), a});
  }
  std::stable_sort(
      starts.begin(), starts.end(),
      [](const auto &x, const auto &y) { return x.first < y.first; });
  starts.erase(std::unique(starts.begin(), starts.end(),
                           [](const auto &x, const auto &y) {
                             return x.second == y.second;
                           }),
               starts.end());
  Assignment best = starts.front().second;
  double bestScore = starts.front().first;
  if (free.empty())
    return bestScore == kInf ? std::nullopt : std::optional<Assignment>(best);

  // Per call, candidates sorted by time: proposals favour fast ones.
  std::vector<std::vector<int>> byTime(p.calls.size());
  for (size_t c : free) {
    byTime[c].resize(p.cands[c].size());
    for (size_t k = 0; k < byTime[c].size(); ++k)
      byTime[c][k] = int(k);
    std::sort(byTime[c].begin(), byTime[c].end(), [&](int x, int y) {
      return p.cands[c][x].time < p.cands[c][y].time;
    });
  }
  // Per model, its free calls and the meshes where all of them can run.
  MeshIndex mi(p);
  std::vector<std::vector<size_t>> freeOf(p.models.size());
  for (size_t c : free)
    freeOf[p.calls[c].model].push_back(c);
  std::vector<int> movable;
  std::vector<std::vector<size_t>> meshesOf(p.models.size());
  for (size_t m = 0; m < p.models.size(); ++m) {
    if (freeOf[m].empty())
      continue;
    for (size_t x = 0; x < mi.meshes.size(); ++x)
      if (llvm::all_of(freeOf[m],
                       [&](size_t c) { return !mi.on[c][x].empty(); }))
        meshesOf[m].push_back(x);
    if (!meshesOf[m].empty())
      movable.push_back(int(m));
  }

  std::vector<std::vector<size_t>> meshesOfCall(p.calls.size());
  for (size_t c : free)
    for (size_t x = 0; x < mi.meshes.size(); ++x)
      if (!mi.on[c][x].empty())
        meshesOfCall[c].push_back(x);

  const int restarts = 4;
  int64_t perRestart = std::max<int64_t>(1, o.budget / restarts);
  Assignment cur, old;
  for (int rs = 0; rs < restarts; ++rs) {
    bool fromStart = rs + 1 < restarts && size_t(rs) < starts.size();
    cur = fromStart ? starts[rs].second : best;
    double curScore = fromStart ? starts[rs].first : bestScore;
    double t0 = std::isfinite(curScore) ? 0.05 * curScore : 1.0;
    const int64_t tick = std::max<int64_t>(1, restarts * perRestart / 10);
    for (int64_t i = 0; i < perRestart; ++i) {
      if (o.progress && (rs * perRestart + i) % tick == 0)
        o.progress("annealing",
                   double(rs * perRestart + i) / (restarts * perRestart),
                   bestScore);
      double temp = t0 * std::pow(1e-3, double(i) / perRestart);
      old = cur;
      if (!movable.empty() && unit(rng) < 0.25) {
        size_t m = size_t(movable[rng() % movable.size()]);
        size_t x = meshesOf[m][rng() % meshesOf[m].size()];
        for (size_t c : freeOf[m]) {
          const std::vector<int> &ks = mi.on[c][x];
          cur[c] = unit(rng) < 0.5 ? ks.front() : ks[rng() % ks.size()];
        }
      } else {
        size_t c = free[rng() % free.size()];
        const std::vector<int> &ks = byTime[c];
        double u = unit(rng);
        if (u < 0.4)
          cur[c] = ks[rng() % std::min<size_t>(ks.size(), 8)];
        else if (u < 0.7 && !meshesOfCall[c].empty()) {
          const std::vector<int> &on =
              mi.on[c][meshesOfCall[c][rng() % meshesOfCall[c].size()]];
          cur[c] = unit(rng) < 0.5 ? on.front() : on[rng() % on.size()];
        } else
          cur[c] = ks[rng() % ks.size()];
      }
      if (cur == old)
        continue;
      double s = score(cur);
      ++stats.evaluated;
      double delta = s - curScore;
      bool accept = s < kInf && (delta <= 0 || !std::isfinite(curScore) ||
                                 unit(rng) < std::exp(-delta / temp));
      if (accept) {
        curScore = s;
        if (s < bestScore) {
          bestScore = s;
          best = cur;
        }
      } else {
        cur = old;
      }
    }
  }
  if (!std::isfinite(bestScore))
    return std::nullopt;
  // Descent: every single-call and whole-model move from the best plan, the
  // best of them taken, until none improves. Annealing ends near a local
  // optimum; this reaches it.
  if (o.progress)
    o.progress("descent", 1.0, bestScore);
  auto descend = [&](Assignment &best, double &bestScore) {
    for (bool improved = true; improved;) {
      improved = false;
      Assignment next = best;
      double nextScore = bestScore;
      auto tryMove = [&](const Assignment &a) {
        double s = score(a);
        ++stats.evaluated;
        if (s < nextScore) {
          nextScore = s;
          next = a;
        }
      };
      for (size_t c : free)
        for (int k = 0; k < int(p.cands[c].size()); ++k)
          if (k != best[c]) {
            cur = best;
            cur[c] = k;
            tryMove(cur);
          }
      for (int m : movable)
        for (size_t x : meshesOf[size_t(m)]) {
          cur = best;
          for (size_t c : freeOf[size_t(m)])
            cur[c] = mi.on[c][x].front();
          tryMove(cur);
        }
      if (nextScore < bestScore) {
        best = next;
        bestScore = nextScore;
        improved = true;
      }
    }
  };
  descend(best, bestScore);
  // The annealing may leave a start's basin unexplored (on 4x4 GPUs seed 1
  // missed the 8 + 8 partition that seeds 2 and 3 found, 5% faster): the
  // best starts are descended too, and the best local optimum kept.
  for (size_t i = 0; i < std::min<size_t>(starts.size(), 3); ++i) {
    Assignment a = starts[i].second;
    double s = starts[i].first;
    if (a == best)
      continue;
    descend(a, s);
    if (s < bestScore) {
      best = std::move(a);
      bestScore = s;
    }
  }
  stats.bestTime = bestScore;
  return best;
}

std::optional<Method> plan::parseMethod(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Method>>(name)
      .Case("search", Method::Search)
      .Case("heuristic", Method::Heuristic)
      .Case("colocated", Method::Colocated)
      .Case("separated", Method::Separated)
      .Case("manual", Method::Manual)
      .Default(std::nullopt);
}

SearchOptions detail::synchronousStart(const SearchOptions &o) {
  SearchOptions so = o;
  so.progress = nullptr;
  // A quarter of the budget and no polish: on the ReaLHF settings that found
  // the starts that mattered, for about a quarter more search time.
  so.budget = std::max<int64_t>(1, o.budget / 4);
  so.polishNodes = 0;
  return so;
}

std::optional<Assignment> plan::solve(const Problem &p, Method m,
                                      const SearchOptions &o,
                                      SearchStats *stats) {
  SearchStats local;
  SearchStats &st = stats ? *stats : local;
  std::optional<Assignment> a;
  switch (m) {
  case Method::Heuristic:
    a = heuristic(p, o.heuristicSavers);
    break;
  case Method::Colocated:
    a = colocated(p);
    break;
  case Method::Separated:
    a = separated(p);
    break;
  case Method::Manual: {
    for (const Call &c : p.calls)
      if (!c.host && !c.pinned)
        return std::nullopt;
    a = emptyAssignment(p);
    break;
  }
  case Method::Search: {
    if (p.coarse) {
      a = detail::searchScaled(p, o, st);
      break;
    }
    double space = 1;
    for (size_t c : freeCalls(p))
      space *= double(p.cands[c].size());
    if (p.staleness > 0) {
      // Asynchronous plans: the bounds the exact search prunes with are
      // weak once generation may overlap training (Bounds.cpp), so only
      // annealing and its descent run, then the split search around the
      // best generator meshes (SearchAsync.cpp).
      a = detail::solveAsync(p, o, st);
    } else if (space <= double(o.exhaustiveLimit)) {
      ExactStats ex;
      a = exactSearch(p, ExactOptions{std::numeric_limits<int64_t>::max(), 0},
                      ex);
      st.exhaustive = ex.proven;
      st.evaluated = ex.leaves;
      st.bestTime = a ? ex.bestTime : 0;
    } else {
      a = detail::anneal(p, o, st);
      // Polish: a branch-and-bound from the annealed plan, cut at a node
      // budget (deterministic, unlike a time limit).
      if (a && o.polishNodes > 0) {
        if (o.progress)
          o.progress("polishing", 1.0, st.bestTime);
        ExactStats ex;
        auto b = exactSearch(p, ExactOptions{o.polishNodes, 0}, ex, &*a);
        if (b) {
          a = b;
          st.bestTime = ex.bestTime;
          st.exhaustive = ex.proven;
        }
      }
    }
    break;
  }
  }
  if (a && st.bestTime == 0)
    st.bestTime = simulate(p, *a).iterationTime;
  return a;
}

ProblemOptions plan::problemOptionsFor(mlir::rlhf::AlgorithmOp alg) {
  // Under staleness the generator keeps a copy of the weights and a split
  // confines the other models to the GPUs it leaves, so a frozen model's
  // weights resting in host memory is what lets many splits fit at all:
  // offer it from the start (the search tries without it first). Half-node
  // meshes let the calls beside the generator balance their share.
  ProblemOptions o;
  o.offload = alg.getStaleness() > 0;
  o.halfNodeMeshes = alg.getStaleness() > 0;
  return o;
}

mlir::FailureOr<Planned> plan::planAlgorithm(mlir::rlhf::AlgorithmOp alg,
                                             const cost::Calibration &cal,
                                             Method m, const SearchOptions &o,
                                             SearchStats *stats) {
  auto p = buildProblem(alg, cal, problemOptionsFor(alg));
  if (mlir::failed(p))
    return mlir::failure();
  Planned out{std::move(*p), std::nullopt};
  out.assignment = solve(out.problem, m, o, stats);
  if (out.assignment || m != Method::Search)
    return out;
  // Nothing fits together: plan again with the memory savers, which cost
  // time (a copy from host memory per call; more dp traffic or a forward
  // pass more per train step).
  ProblemOptions savers = problemOptionsFor(alg);
  savers.offload = true;
  savers.trainSavers = true;
  auto q = buildProblem(alg, cal, savers);
  if (mlir::failed(q))
    return mlir::failure();
  out.problem = std::move(*q);
  // The second round reports as the first, its stages marked.
  SearchOptions so = o;
  if (o.progress) {
    o.progress("nothing fits as it is: searching again with offloading and "
               "recomputation",
               1.0, std::numeric_limits<double>::infinity());
    so.progress = [&o](llvm::StringRef stage, double done, double best) {
      o.progress(("with memory savers: " + stage).str(), done, best);
    };
  }
  out.assignment = solve(out.problem, m, so, stats);
  return out;
}

void plan::apply(const Problem &p, const Assignment &a) {
  for (size_t c = 0; c < p.calls.size(); ++c) {
    const Call &call = p.calls[c];
    if (call.host || call.pinned)
      continue;
    const cost::Strategy &s = p.cands[c][a[c]].s;
    mlir::MLIRContext *ctx = call.op->getContext();
    call.op->setAttr("mesh", r::MeshAttr::get(ctx, s.firstGpu, s.devices()));
    call.op->setAttr("strategy",
                     r::StrategyAttr::get(ctx, s.dp, s.tp, s.pp, s.microBatches,
                                          s.zero, s.recompute, s.offload,
                                          s.sp));
  }
}
