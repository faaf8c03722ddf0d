//===- Groups.cpp - the process groups of a layout ------------------------===//

#include "rlhf/runtime/Groups.h"

#include <functional>

using namespace rlhf;

ParallelGroups rlhf::makeGroups(Communicator &world, const Layout &L) {
  ParallelGroups g;
  const int me = world.rank();
  // All groups of one kind, each listed once (by its first member), created
  // in the same order on every rank.
  auto kind = [&](const std::function<std::vector<int>(int64_t, int64_t, int64_t)> &members,
                  int64_t degree) {
    std::unique_ptr<Communicator> mine;
    if (degree <= 1)
      return mine;
    for (int64_t d = 0; d < L.dp; ++d)
      for (int64_t s = 0; s < L.pp; ++s)
        for (int64_t t = 0; t < L.tp; ++t) {
          std::vector<int> m = members(d, s, t);
          if (m.front() != int(L.gpu(d, s, t)))
            continue;
          if (auto c = world.subgroup(m))
            mine = std::move(c);
        }
    return mine;
  };
  g.tp = kind([&](int64_t d, int64_t s, int64_t) {
    std::vector<int> m;
    for (int64_t t = 0; t < L.tp; ++t)
      m.push_back(int(L.gpu(d, s, t)));
    return m;
  }, L.tp);
  g.pp = kind([&](int64_t d, int64_t, int64_t t) {
    std::vector<int> m;
    for (int64_t s = 0; s < L.pp; ++s)
      m.push_back(int(L.gpu(d, s, t)));
    return m;
  }, L.pp);
  g.dp = kind([&](int64_t, int64_t s, int64_t t) {
    std::vector<int> m;
    for (int64_t d = 0; d < L.dp; ++d)
      m.push_back(int(L.gpu(d, s, t)));
    return m;
  }, L.dp);
  if (auto c = L.coordsOf(me)) {
    g.member = true;
    g.tpRank = int(c->t);
    g.stage = int(c->s);
    g.dpRank = int(c->d);
  }
  return g;
}

std::pair<std::unique_ptr<Communicator>, std::unique_ptr<Communicator>>
rlhf::makeSeqGroups(Communicator &world, const Layout &L, int ring) {
  std::pair<std::unique_ptr<Communicator>, std::unique_ptr<Communicator>> out;
  const int64_t sp = L.pp, ulysses = sp / ring;
  if (ring <= 1 || ulysses <= 1)
    return out;
  // Groups of `inner` sp ranks, `outer` of them per sp group; sp rank
  // s = ring rank * ulysses + ulysses rank.
  auto make = [&](int64_t outer, int64_t inner,
                  const std::function<int64_t(int64_t, int64_t)> &spRank,
                  std::unique_ptr<Communicator> &mine) {
    for (int64_t d = 0; d < L.dp; ++d)
      for (int64_t t = 0; t < L.tp; ++t)
        for (int64_t o = 0; o < outer; ++o) {
          std::vector<int> m;
          for (int64_t i = 0; i < inner; ++i)
            m.push_back(int(L.gpu(d, spRank(o, i), t)));
          if (auto c = world.subgroup(m))
            mine = std::move(c);
        }
  };
  make(
      ring, ulysses, [&](int64_t r, int64_t u) { return r * ulysses + u; },
      out.first);
  make(
      ulysses, ring, [&](int64_t u, int64_t r) { return r * ulysses + u; },
      out.second);
  return out;
}
