//===- Exact.cpp - branch-and-bound over the candidates of every call -----===//
//
// Depth-first over the free calls in program order (the dataflow order, so
// data edges and transfers become known early). A subtree is cut when its
// bound, iterationBounds of the partial assignment, is no better than the
// incumbent, or when memoryLowerBound already overflows a GPU. Both bounds
// only grow as calls are assigned, and the simulator's iteration time is at
// least iterationBounds of the full assignment, so nothing better than the
// result is ever cut: when the tree is exhausted the result is optimal.
//
// No symmetry reduction: a mesh's mirror image inside a node reorders the
// ranks of every larger mesh that contains it, which changes reallocation
// costs, so mirrored assignments are not equivalent in this cost model.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/Planner/Planner.h"

#include <algorithm>
#include <chrono>

using namespace rlhfc;
using namespace rlhfc::plan;

namespace {

struct BranchAndBound {
  const Problem &p;
  const ExactOptions &o;
  ExactStats &st;
  std::vector<size_t> order;               ///< free calls, program order
  std::vector<std::vector<int>> candOrder; ///< per call, fastest first
  Assignment cur, best;
  std::chrono::steady_clock::time_point t0;
  bool aborted = false;

  BranchAndBound(const Problem &p, const ExactOptions &o, ExactStats &st)
      : p(p), o(o), st(st), t0(std::chrono::steady_clock::now()) {}

  bool outOfBudget() {
    if (st.nodes >= o.nodeLimit)
      return true;
    if (o.timeLimit > 0 && (st.nodes & 0xfff) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count() > o.timeLimit)
      return true;
    return false;
  }

  void dfs(size_t depth) {
    if (aborted)
      return;
    if (depth == order.size()) {
      ++st.leaves;
      SimResult r = simulate(p, cur);
      if (!r.oom && r.iterationTime < st.bestTime) {
        st.bestTime = r.iterationTime;
        best = cur;
      }
      return;
    }
    size_t c = order[depth];
    for (int k : candOrder[c]) {
      if (++st.nodes, outOfBudget()) {
        aborted = true;
        return;
      }
      cur[c] = k;
      if (memoryLowerBound(p, cur) > p.memoryLimit)
        continue;
      // Strictly better only: ties keep the incumbent (the first found).
      if (iterationBounds(p, cur).max() >= st.bestTime)
        continue;
      dfs(depth + 1);
      if (aborted)
        break;
    }
    cur[c] = -1;
  }
};

} // namespace

std::optional<Assignment> plan::exactSearch(const Problem &p,
                                            const ExactOptions &o,
                                            ExactStats &st,
                                            const Assignment *incumbent) {
  BranchAndBound bb(p, o, st);
  bb.cur.assign(p.calls.size(), -1);
  bb.candOrder.resize(p.calls.size());
  for (size_t c = 0; c < p.calls.size(); ++c) {
    if (p.calls[c].host)
      continue;
    if (p.calls[c].pinned) {
      bb.cur[c] = 0;
      continue;
    }
    bb.order.push_back(c);
    std::vector<int> &ks = bb.candOrder[c];
    for (int k = 0; k < int(p.cands[c].size()); ++k)
      ks.push_back(k);
    std::stable_sort(ks.begin(), ks.end(), [&](int x, int y) {
      return p.cands[c][x].time < p.cands[c][y].time;
    });
  }
  st.bestTime = kInfTime;
  if (incumbent) {
    SimResult r = simulate(p, *incumbent);
    if (!r.oom) {
      st.bestTime = r.iterationTime;
      bb.best = *incumbent;
    }
  }
  bb.dfs(0);
  st.proven = !bb.aborted;
  if (bb.best.empty())
    return std::nullopt;
  return bb.best;
}
