//===- ReallocPlanTest.cpp - slice-level reallocation plans ---------------===//

#include "rlhf/runtime/ReallocPlan.h"

#include <gtest/gtest.h>

#include <map>

using namespace rlhf;

namespace {

ModelShape tiny() {
  ModelShape m;
  m.layers = 6;
  m.hidden = 64;
  m.heads = 8;
  m.kvHeads = 4;
  m.ffn = 176;
  m.vocab = 512;
  return m;
}

/// Every destination GPU ends up with exactly the slices its layout assigns
/// it, each covered once, for every pair of layouts of 8 GPUs.
TEST(ReallocPlan, EveryPairOfLayoutsCoversEachShardExactlyOnce) {
  ModelShape m = tiny();
  std::vector<ParamSpec> ps = llamaParams(m);
  std::vector<Layout> layouts;
  for (int64_t tp : {1, 2, 4, 8})
    for (int64_t pp : {1, 2, 3})
      for (int64_t dp = 1; dp * tp * pp <= 8; dp *= 2)
        if (m.heads % tp == 0 && m.kvHeads % tp == 0)
          layouts.push_back({0, dp, tp, pp});
  ASSERT_GT(layouts.size(), 10u);
  for (const Layout &from : layouts)
    for (const Layout &to : layouts) {
      ReallocPlan plan = planRealloc(ps, from, to, m.layers, 4);
      // (param, dst) -> covered fraction
      std::map<std::pair<int, int64_t>, double> covered;
      for (const SliceMove &mv : plan.moves) {
        covered[{mv.param, mv.dst}] += mv.hi - mv.lo;
        // The source really holds the slice under `from`.
        const ParamSpec &p = ps[mv.param];
        int64_t stage = stageOf(p.layer, m.layers, from.pp);
        auto c = from.coordsOf(mv.src);
        ASSERT_TRUE(c) << p.name;
        ASSERT_EQ(c->s, stage) << p.name;
        Range have = shardRange(p.shard, c->t,
                                p.shard == Shard::Replicated ? 1 : from.tp);
        ASSERT_LE(have.lo, mv.lo + 1e-12);
        ASSERT_GE(have.hi, mv.hi - 1e-12);
      }
      for (int pi = 0; pi < int(ps.size()); ++pi) {
        const ParamSpec &p = ps[pi];
        int64_t stage = stageOf(p.layer, m.layers, to.pp);
        double want = p.shard == Shard::Replicated ? 1.0 : 1.0 / to.tp;
        for (int64_t d = 0; d < to.dp; ++d)
          for (int64_t t = 0; t < to.tp; ++t)
            ASSERT_NEAR((covered[{pi, to.gpu(d, stage, t)}]), want, 1e-9)
                << p.name << " dp" << d << " tp" << t;
      }
    }
}

TEST(ReallocPlan, StagesSplitLayersEvenly) {
  EXPECT_EQ(stageOf(0, 10, 3), 0);
  EXPECT_EQ(stageOf(3, 10, 3), 0);
  EXPECT_EQ(stageOf(4, 10, 3), 1);
  EXPECT_EQ(stageOf(6, 10, 3), 1);
  EXPECT_EQ(stageOf(7, 10, 3), 2);
  EXPECT_EQ(stageOf(9, 10, 3), 2);
  EXPECT_EQ(stageOf(-1, 10, 3), 0);
  EXPECT_EQ(stageOf(-2, 10, 3), 2);
}

TEST(ReallocPlan, StageLayersInvertsStageOf) {
  for (int64_t layers : {1, 7, 10, 32, 80})
    for (int64_t pp = 1; pp <= layers && pp <= 16; ++pp) {
      int64_t next = 0;
      for (int64_t s = 0; s < pp; ++s) {
        auto [lo, hi] = stageLayers(s, layers, pp);
        EXPECT_EQ(lo, next) << layers << " layers, pp" << pp << " stage " << s;
        EXPECT_GT(hi, lo);
        for (int64_t l = lo; l < hi; ++l)
          EXPECT_EQ(stageOf(int(l), layers, pp), s);
        next = hi;
      }
      EXPECT_EQ(next, layers);
    }
}

TEST(ReallocPlan, HuggingFaceNames) {
  std::vector<ParamSpec> ps = llamaParams(tiny());
  EXPECT_EQ(ps.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(ps[2].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(ps.back().name, "lm_head.weight");
  EXPECT_EQ(ps.size(), 1u + 6 * 9 + 2);
}

} // namespace
