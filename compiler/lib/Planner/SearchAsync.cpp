//===- SearchAsync.cpp - split-aware search of asynchronous plans ---------===//
//
// Under staleness the generator runs on its own mesh while the other calls
// fill the rest of the cluster, and the period tends to the slower side.
// Annealing over all calls at once settles on a generator mesh early and
// then seldom rearranges the other calls around it: moving one inference
// off the generator's GPUs, or onto GPUs a train step leaves idle, pays
// only together with other moves. So the annealing records the best plan
// it saw per generator mesh, and the best mesh of each of the few best
// sizes is searched again with the generators fixed there and every other
// call on the GPUs outside them (a split), from that plan where it is one.
// On the ReaLHF settings this found plans up to 11% faster than annealing
// over the whole space (docs/benchmarks.md).
//
// Offloaded candidates (a frozen model's weights resting in host memory)
// make many splits fit, and meshes of whole nodes and a half balance the
// calls beside the generator, but both widen the space, and the annealing
// then misses plans it found without them. So the search runs without them
// first, then with them from that plan, and is never slower than the first
// pass.
//
//===----------------------------------------------------------------------===//

#include "Anneal.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

using namespace rlhfc;
using namespace rlhfc::plan;

namespace {

/// Generator meshes searched again after the annealing, best first, each
/// on a fifth of the budget.
constexpr size_t kRefinedMeshes = 3;
constexpr int64_t kBudgetShare = 5;
/// The pass with offloaded candidates and half-node meshes starts from the
/// plan without them and takes half the budget: the full budget found no
/// better plans there.
constexpr int64_t kOffloadShare = 2;

using Mesh = std::pair<int64_t, int64_t>; ///< (first GPU, GPUs)

} // namespace

std::optional<Assignment> plan::detail::searchAsync(const Problem &p,
                                                    const SearchOptions &o,
                                                    SearchStats &st,
                                                    const Assignment *seed) {
  // The free generates that may run ahead, whose meshes key the split.
  std::vector<size_t> gens;
  for (size_t c = 0; c < p.calls.size(); ++c)
    if (!p.calls[c].host && !p.calls[c].pinned && p.calls[c].stale > 0)
      gens.push_back(c);
  std::map<std::vector<Mesh>, std::pair<double, Assignment>> bestOn;
  SeenFn seen;
  if (!gens.empty())
    seen = [&](const Assignment &a, double s) {
      std::vector<Mesh> key;
      for (size_t c : gens)
        key.push_back({p.cands[c][a[c]].s.firstGpu, p.cands[c][a[c]].devices});
      auto [it, added] = bestOn.try_emplace(std::move(key), s, a);
      if (!added && s < it->second.first)
        it->second = {s, a};
    };
  std::optional<Assignment> best = anneal(p, o, st, seed, seen);
  if (!best)
    return best;
  double bestScore = st.bestTime;

  // One mesh per split size: mirrored or shifted meshes of one size rank
  // alike and would crowd out the other sizes.
  std::map<std::vector<int64_t>, std::pair<double, const std::vector<Mesh> *>>
      bySize;
  for (const auto &[key, entry] : bestOn) {
    // A generator on the whole cluster leaves no GPU to split off.
    if (llvm::any_of(key, [&](Mesh m) { return m.second >= p.gpus; }))
      continue;
    std::vector<int64_t> size;
    for (Mesh m : key)
      size.push_back(m.second);
    auto [it, added] = bySize.try_emplace(size, entry.first, &key);
    if (!added && entry.first < it->second.first)
      it->second = {entry.first, &key};
  }
  std::vector<std::pair<double, const std::vector<Mesh> *>> ranked;
  for (const auto &[size, entry] : bySize)
    ranked.push_back(entry);
  std::stable_sort(
      ranked.begin(), ranked.end(),
      [](const auto &x, const auto &y) { return x.first < y.first; });
  if (ranked.size() > kRefinedMeshes)
    ranked.resize(kRefinedMeshes);

  SearchOptions q = o;
  q.budget = std::max<int64_t>(1, o.budget / kBudgetShare);
  q.progress = nullptr;
  for (auto [score, key] : ranked) {
    auto onKey = [&](size_t g, const Candidate &k) {
      return Mesh{k.s.firstGpu, k.devices} == (*key)[g];
    };
    auto outside = [&](const Candidate &k) {
      return llvm::all_of(*key, [&](Mesh m) {
        return k.s.firstGpu >= m.first + m.second ||
               k.s.firstGpu + k.devices <= m.first;
      });
    };
    std::vector<std::vector<int>> from;
    Problem split = p.restricted(
        [&](size_t c, const Candidate &k) {
          auto g = llvm::find(gens, c);
          return g == gens.end() ? outside(k) : onKey(g - gens.begin(), k);
        },
        from);
    if (llvm::any_of(llvm::seq(p.calls.size()), [&](size_t c) {
          return !p.calls[c].host && split.cands[c].empty();
        }))
      continue;
    // The best plan seen on this mesh, in the copy's indices, if it is a
    // split.
    const Assignment &on = bestOn[*key].second;
    Assignment start(on.size(), -1);
    bool seeded = true;
    for (size_t c = 0; c < on.size(); ++c)
      if (on[c] >= 0) {
        auto it = llvm::find(from[c], on[c]);
        seeded &= it != from[c].end();
        start[c] = int(it - from[c].begin());
      }
    if (o.progress) {
      std::string where;
      for (Mesh m : *key)
        where += llvm::formatv("{0}[{1}:{2}]", where.empty() ? "" : ", ",
                               m.first, m.first + m.second)
                     .str();
      o.progress("splitting around the generator on " + where, 1.0, bestScore);
    }
    SearchStats fs;
    std::optional<Assignment> a =
        anneal(split, q, fs, seeded ? &start : nullptr);
    st.evaluated += fs.evaluated;
    if (!a || !(fs.bestTime < bestScore))
      continue;
    for (size_t c = 0; c < a->size(); ++c)
      if ((*a)[c] >= 0)
        (*a)[c] = from[c][(*a)[c]];
    best = std::move(a);
    bestScore = fs.bestTime;
  }
  st.bestTime = bestScore;
  return best;
}

std::optional<Assignment> plan::detail::solveAsync(const Problem &p,
                                                   const SearchOptions &o,
                                                   SearchStats &st) {
  // The synchronous annealing's plan is one of the starts: where its
  // generate shares its trainer's layout it keeps no copy and runs nothing
  // ahead, so it prices as without staleness, and the plan under staleness
  // is no slower. (A generate in a layout of its own keeps a copy under
  // staleness, which may price higher.)
  auto search = [&](const Problem &q) {
    Problem sync = q;
    sync.staleness = 0;
    SearchStats ss;
    std::optional<Assignment> start =
        solve(sync, Method::Search, synchronousStart(o), &ss);
    st.evaluated += ss.evaluated;
    return searchAsync(q, o, st, start ? &*start : nullptr);
  };
  // The first pass keeps to the narrow space: resident weights, and meshes
  // of power-of-two GPUs inside a node or of whole nodes. A pinned call
  // keeps its candidate whatever it is: the user chose it, and dropping it
  // would leave the first pass without the call.
  const int64_t gpn = p.hw.gpusPerNode;
  auto narrow = [&](size_t c, const Candidate &k) {
    return p.calls[c].pinned ||
           (!k.s.offload && (k.devices <= gpn || k.devices % gpn == 0));
  };
  std::vector<std::vector<int>> from;
  Problem stay = p.restricted(narrow, from);
  bool offered = false, fits = true;
  for (size_t c = 0; c < p.calls.size(); ++c) {
    offered |= stay.cands[c].size() != p.cands[c].size();
    fits &= p.calls[c].host || !stay.cands[c].empty();
  }
  if (!offered || !fits)
    return search(p);
  std::optional<Assignment> a = search(stay);
  if (a)
    for (size_t c = 0; c < a->size(); ++c)
      if ((*a)[c] >= 0)
        (*a)[c] = from[c][(*a)[c]];
  SearchOptions q = o;
  q.budget = std::max<int64_t>(1, o.budget / kOffloadShare);
  // The second pass reports as the first, its stages marked as widened.
  if (o.progress) {
    o.progress("widening to offloaded models and half-node meshes", 1.0,
               a ? st.bestTime : std::numeric_limits<double>::infinity());
    q.progress = [&o](llvm::StringRef stage, double done, double best) {
      o.progress(("widened: " + stage).str(), done, best);
    };
  }
  SearchStats fs;
  std::optional<Assignment> b = searchAsync(p, q, fs, a ? &*a : nullptr);
  st.evaluated += fs.evaluated;
  if (b && (!a || fs.bestTime < st.bestTime)) {
    a = std::move(b);
    st.bestTime = fs.bestTime;
  }
  return a;
}
