//===- CostModelTest.cpp - scaling laws and memory accounting -------------===//

#include "rlhfc/CostModel/CostModel.h"
#include "LlamaShape.h"

#include <gtest/gtest.h>

using namespace rlhfc::cost;

namespace {

using rlhfc::shapes::llamaShape;

Arch llama2_7b() {
  return Arch::get(llamaShape(32, 4096, 32, 32, 11008), 4096);
}
Arch llama2_13b() {
  return Arch::get(llamaShape(40, 5120, 40, 40, 13824), 4096);
}
Arch llama2_70b() {
  return Arch::get(llamaShape(80, 8192, 64, 8, 28672), 4096);
}

Hardware h100() { return *knownHardware("H100_SXM"); }

Strategy layout(int64_t dp, int64_t tp, int64_t pp, int64_t mbs = 1) {
  Strategy s;
  s.dp = dp;
  s.tp = tp;
  s.pp = pp;
  s.microBatches = mbs;
  return s;
}

CallShape train(int64_t batch, int64_t seq) {
  CallShape c;
  c.kind = CallKind::Train;
  c.batch = batch;
  c.seqLen = seq;
  c.trainable = true;
  return c;
}

CallShape generate(int64_t batch, int64_t prompt, int64_t gen) {
  CallShape c;
  c.kind = CallKind::Generate;
  c.batch = batch;
  c.promptLen = prompt;
  c.genLen = gen;
  return c;
}

// Parameter counts equal the Hugging Face checkpoints' exactly.
TEST(CostModel, ParameterCountsMatchPublishedCheckpoints) {
  EXPECT_EQ(int64_t(llama2_7b().totalParams), 6738415616);
  EXPECT_EQ(int64_t(llama2_13b().totalParams), 13015864320);
  EXPECT_EQ(int64_t(llama2_70b().totalParams), 68976648192);
  // Qwen2.5 (stdlib/models/qwen2_5.rlhf): q/k/v biases, and a tied head
  // for 0.5B; the model cards' counts.
  rlhf::ModelShape q7{28, 3584, 28, 4, 18944, 152064};
  q7.qkvBias = true;
  EXPECT_EQ(int64_t(Arch::get(q7, 131072).totalParams), 7615616512);
  rlhf::ModelShape q05{24, 896, 14, 2, 4864, 151936};
  q05.qkvBias = q05.tieEmbeddings = true;
  EXPECT_EQ(int64_t(Arch::get(q05, 32768).totalParams), 494032768);
}

// LLaMA-2 7B trained on one GPU: bf16 weights (2 bytes per parameter), fp32
// gradient accumulators (4), fp32 master weights and Adam moments (12).
TEST(CostModel, Llama2_7bTrainingMemoryByHand) {
  const double P = 6738415616.0;
  Estimate e = estimateCall(llama2_7b(), h100(), layout(1, 1, 1), train(8, 512));
  EXPECT_DOUBLE_EQ(e.memory.weights, 2 * P);
  EXPECT_DOUBLE_EQ(e.memory.grads, 4 * P);
  EXPECT_DOUBLE_EQ(e.memory.optimizer, 12 * P);
  // Activations: 8 x 512 tokens, 34 bytes per token per hidden unit per
  // layer, 32 layers, plus the fused lm head's three chunks of fp32 logits,
  // 1024 positions each (125 MiB; the whole logits would be 524 MB).
  const double chunk = 1024 * 32000 * 4.0;
  double act = 8 * 512 * 4096.0 * 34 * 32 + 3 * chunk;
  EXPECT_DOUBLE_EQ(e.memory.activations, act);
  EXPECT_DOUBLE_EQ(e.memory.kvCache, 0);

  // tp = 8 shards everything by 8; ZeRO over dp = 2 shards the optimizer.
  Strategy s = layout(2, 8, 1);
  s.zero = true;
  Estimate z = estimateCall(llama2_7b(), h100(), s, train(16, 512));
  EXPECT_DOUBLE_EQ(z.memory.weights, 2 * P / 8);
  EXPECT_DOUBLE_EQ(z.memory.optimizer, 12 * P / 8 / 2);
  // Its reduce-scatter hides behind backward as the all-reduce does (half,
  // by default); its all-gather after the step does not.
  s.zero = false;
  Estimate d = estimateCall(llama2_7b(), h100(), s, train(16, 512));
  EXPECT_DOUBLE_EQ(z.time.dpComm, d.time.dpComm * 1.5);

  // Two stages, two micro-batches of 4 x 512 tokens: stage 0 keeps both in
  // flight over its 16 layers; the last stage runs the same fused head, so
  // the logits stay three chunks (whole, 262 MB a micro-batch).
  Estimate p = estimateCall(llama2_7b(), h100(), layout(1, 1, 2, 2), train(8, 512));
  EXPECT_DOUBLE_EQ(p.memory.activations,
                   4 * 512 * 4096.0 * 34 * 16 * 2 + 3 * chunk);
}

// Generation of LLaMA-2 7B: the KV cache holds K and V of every token in
// every layer, bf16: 2 * 32 * 4096 * 2 bytes per token.
TEST(CostModel, Llama2_7bKvCacheByHand) {
  Estimate e = estimateCall(llama2_7b(), h100(), layout(1, 1, 1), generate(64, 128, 128));
  EXPECT_DOUBLE_EQ(e.memory.kvCache, 64.0 * 256 * 2 * 32 * 4096 * 2);
  EXPECT_DOUBLE_EQ(e.memory.grads, 0);
  // GQA (LLaMA-2 70B: 8 kv heads of 64) shrinks the cache by 8x per layer.
  Estimate g = estimateCall(llama2_70b(), h100(), layout(1, 8, 1), generate(64, 128, 128));
  EXPECT_DOUBLE_EQ(g.memory.kvCache, 64.0 * 256 * 2 * 80 * 1 * 128 * 2);
}

// Generation in waves (mbs > 1): a dp rank's rows run one wave after
// another, each with a KV cache of its own rows, so the cache divides by
// the waves; every wave reads the weights at each decode step, so the time
// grows (here, at 16 rows a wave, 2.8x: the KV reads and prefill's FLOPs do
// not multiply).
TEST(CostModel, GenerationWavesDivideTheKvCache) {
  Estimate one = estimateCall(llama2_7b(), h100(), layout(1, 1, 1, 1),
                              generate(64, 128, 128));
  Estimate four = estimateCall(llama2_7b(), h100(), layout(1, 1, 1, 4),
                               generate(64, 128, 128));
  EXPECT_DOUBLE_EQ(four.memory.kvCache, one.memory.kvCache / 4);
  EXPECT_DOUBLE_EQ(four.memory.weights, one.memory.weights);
  EXPECT_GT(four.time.total(), 2.0 * one.time.total());
  EXPECT_LT(four.time.total(), 4.0 * one.time.total());
  // The same FLOPs either way.
  EXPECT_DOUBLE_EQ(four.flops, one.flops);
  // With pipeline stages each wave passes every stage in turn.
  Estimate pp2 = estimateCall(llama2_7b(), h100(), layout(1, 1, 2, 2),
                              generate(64, 128, 128));
  Estimate pp1 = estimateCall(llama2_7b(), h100(), layout(1, 1, 1, 2),
                              generate(64, 128, 128));
  EXPECT_GT(pp2.time.compute, 0.9 * pp1.time.compute);
}

TEST(CostModel, RaisingTpCutsMathButAddsCommunication) {
  Estimate t1 = estimateCall(llama2_7b(), h100(), layout(1, 1, 1), train(64, 1024));
  Estimate t2 = estimateCall(llama2_7b(), h100(), layout(1, 2, 1), train(64, 1024));
  Estimate t8 = estimateCall(llama2_7b(), h100(), layout(1, 8, 1), train(64, 1024));
  EXPECT_LT(t2.time.compute, t1.time.compute);
  EXPECT_LT(t8.time.compute, t2.time.compute);
  EXPECT_EQ(t1.time.tpComm, 0);
  EXPECT_GT(t2.time.tpComm, 0);
  EXPECT_GT(t8.time.tpComm, t2.time.tpComm);
}

// Under tp the runtime shards positions in training (Megatron's sequence
// parallelism, TensorParallel::shardSequence), within each sp rank's
// chunk beside Ulysses sp: every activation byte of a layer divides by tp.
// Priced without it (a published system that did not), the norms' and
// projections' inputs (8 of the 34 bytes per token and hidden unit) are
// whole on every tp rank. A value head keeps 4 bytes per position.
// Sharding also gathers the projections' inputs again in backward: five
// all-reduces' bytes per layer, against four without and recomputation's
// six.
TEST(CostModel, TpShardsPositions) {
  rlhf::ModelShape v = llamaShape(32, 4096, 32, 32, 11008);
  v.valueHead = true;
  const Arch critic = Arch::get(v, 4096);
  const double T = 8 * 1024.0; // tokens of the one micro-batch
  Strategy tp4 = layout(1, 4, 1);
  Estimate sharded = estimateCall(critic, h100(), tp4, train(8, 1024));
  EXPECT_DOUBLE_EQ(sharded.memory.activations,
                   32 * T * 4096 * 34.0 / 4 + T * 4);
  Strategy withSp = tp4;
  withSp.sp = 2;
  Estimate sp2 = estimateCall(critic, h100(), withSp, train(8, 1024));
  EXPECT_DOUBLE_EQ(sp2.memory.activations,
                   32 * (T / 2) * 4096 * 34.0 / 4 + T / 2 * 4);
  Strategy unsharded = tp4;
  unsharded.shardSequence = false;
  Estimate whole = estimateCall(critic, h100(), unsharded, train(8, 1024));
  EXPECT_DOUBLE_EQ(whole.memory.activations,
                   32 * T * 4096 * (26.0 / 4 + 8) + T * 4);
  EXPECT_NEAR(sharded.time.tpComm / whole.time.tpComm, 5.0 / 4.0, 1e-12);
  Strategy recomputed = tp4;
  recomputed.recompute = true;
  Estimate replay = estimateCall(critic, h100(), recomputed, train(8, 1024));
  // Recomputation keeps each layer's input block, and the layer it replays
  // holds its projections' inputs as gathered (4 of the 34 bytes whole).
  EXPECT_DOUBLE_EQ(replay.memory.activations,
                   32 * T * 4096 * 2.0 / 4 + T * 4096 * (30.0 / 4 + 4) + T * 4);
  EXPECT_NEAR(sharded.time.tpComm / replay.time.tpComm, 5.0 / 6.0, 1e-12);
}

// The runtime's fused lm head recomputes its logits in backward: a train
// call prices the head's GEMM four times (forward, recomputation, two
// backward), the layers' three times; inference once each. A tied head
// (no parameters of its own) still runs its GEMM.
TEST(CostModel, TrainPricesTheFusedHeadsRecomputation) {
  auto compute = [](int64_t vocab, bool tied, const CallShape &c) {
    rlhf::ModelShape m = llamaShape(32, 4096, 32, 32, 11008);
    m.vocab = vocab;
    m.tieEmbeddings = tied;
    return estimateCall(Arch::get(m, 4096), h100(), layout(1, 1, 1), c)
        .time.compute;
  };
  CallShape infer = train(16, 1024);
  infer.kind = CallKind::Inference;
  infer.trainable = false;
  const double headTrain = compute(64000, false, train(16, 1024)) -
                           compute(32000, false, train(16, 1024));
  const double headInfer =
      compute(64000, false, infer) - compute(32000, false, infer);
  EXPECT_GT(headInfer, 0);
  EXPECT_NEAR(headTrain / headInfer, 4.0, 1e-6);
  EXPECT_DOUBLE_EQ(compute(32000, true, train(16, 1024)),
                   compute(32000, false, train(16, 1024)));
  // A value head keeps its output: no recomputation of it.
  rlhf::ModelShape v = llamaShape(32, 4096, 32, 32, 11008);
  v.valueHead = true;
  Estimate critic = estimateCall(Arch::get(v, 4096), h100(), layout(1, 1, 1),
                                 train(16, 1024));
  Estimate lm =
      estimateCall(llama2_7b(), h100(), layout(1, 1, 1), train(16, 1024));
  EXPECT_LT(critic.time.compute, lm.time.compute);
}

// Generation's prefill runs the lm head on each prompt's last position
// only (ModelGenerate.cpp): a wider vocabulary costs a long prompt no more
// than a short one, and its FLOPs count the head once per sequence and
// generated token.
TEST(CostModel, PrefillRunsTheHeadOnTheLastPosition) {
  auto est = [](int64_t vocab, int64_t prompt) {
    rlhf::ModelShape m = llamaShape(32, 4096, 32, 32, 11008);
    m.vocab = vocab;
    return estimateCall(Arch::get(m, 4096), h100(), layout(1, 1, 1),
                        generate(64, prompt, 1));
  };
  const double longer = est(64000, 2048).time.compute -
                        est(32000, 2048).time.compute,
               shorter =
                   est(64000, 16).time.compute - est(32000, 16).time.compute;
  EXPECT_GT(shorter, 0);
  EXPECT_LT(longer, 1.5 * shorter);
  EXPECT_DOUBLE_EQ(est(64000, 2048).flops - est(32000, 2048).flops,
                   2.0 * 64 * (1 + 1) * 32000 * 4096);
}

TEST(CostModel, DecodeTimeTracksBytesRead) {
  // At batch 1 decode reads the weights every token: time scales with the
  // model's bytes, not its FLOPs.
  Estimate small = estimateCall(llama2_7b(), h100(), layout(1, 1, 1), generate(1, 16, 256));
  Estimate big = estimateCall(llama2_13b(), h100(), layout(1, 1, 1), generate(1, 16, 256));
  double bytesRatio = llama2_13b().totalParams / llama2_7b().totalParams;
  double timeRatio = big.time.total() / small.time.total();
  EXPECT_NEAR(timeRatio, bytesRatio, 0.15 * bytesRatio);
  // Per-token time is about weight bytes / achievable bandwidth.
  Hardware hw = h100();
  double perToken = small.time.total() / 256;
  double weightRead = 2 * llama2_7b().totalParams / (hw.hbmBw * hw.eff.hbm);
  EXPECT_GT(perToken, weightRead);
  EXPECT_LT(perToken, 1.5 * weightRead);
  // A longer context reads a larger KV cache.
  Estimate longCtx = estimateCall(llama2_7b(), h100(), layout(1, 1, 1), generate(64, 2048, 256));
  Estimate shortCtx = estimateCall(llama2_7b(), h100(), layout(1, 1, 1), generate(64, 16, 256));
  EXPECT_GT(longCtx.time.total(), shortCtx.time.total());
}

TEST(CostModel, LargerBatchNeverLowersTotalTime) {
  for (auto kind : {CallKind::Generate, CallKind::Inference, CallKind::Train})
    for (auto [dp, tp, pp] : {std::tuple{1, 1, 1}, {2, 4, 1}, {1, 2, 4}, {4, 1, 2}}) {
      double last = 0;
      for (int64_t batch = 8; batch <= 4096; batch *= 2) {
        CallShape c;
        c.kind = kind;
        c.batch = batch;
        c.seqLen = 512;
        c.promptLen = 128;
        c.genLen = 128;
        Estimate e = estimateCall(llama2_7b(), h100(), layout(dp, tp, pp, 4), c);
        EXPECT_GE(e.time.total(), last) << "batch " << batch << " dp " << dp
                                        << " tp " << tp << " pp " << pp;
        last = e.time.total();
      }
    }
}

TEST(CostModel, PipelineBubbleShrinksWithMoreMicroBatches) {
  Estimate m1 = estimateCall(llama2_13b(), h100(), layout(1, 1, 4, 1), train(64, 1024));
  Estimate m16 = estimateCall(llama2_13b(), h100(), layout(1, 1, 4, 16), train(64, 1024));
  // 1 micro-batch: 4 slots for 1 useful; 16: 19 slots for 16 useful.
  EXPECT_NEAR(m1.time.compute / m16.time.compute, 4.0 * 16 / 19, 0.5);
}

// The planner caches and compares estimates across calls: an estimate must
// not depend on what was estimated before it.
TEST(CostModel, EstimatesAreDeterministic) {
  Estimate a = estimateCall(llama2_70b(), h100(), layout(2, 8, 4, 8), train(512, 2048));
  Estimate other =
      estimateCall(llama2_70b(), h100(), layout(1, 8, 1, 1), train(64, 512));
  EXPECT_NE(other.time.total(), a.time.total());
  Estimate b = estimateCall(llama2_70b(), h100(), layout(2, 8, 4, 8), train(512, 2048));
  EXPECT_EQ(a.time.total(), b.time.total());
  EXPECT_EQ(a.memory.total(), b.memory.total());
}

TEST(CostModel, CollectivesUseTheRightLink) {
  Hardware hw = h100();
  Link nv = groupLink(hw, 8, 8), net = groupLink(hw, 16, 1);
  EXPECT_GT(nv.bw, net.bw);
  // Large all-reduces approach the link's (here NVLS) bus bandwidth; small
  // ones pay latency.
  EXPECT_NEAR(allReduceBusBw(8e9, 8, nv), nv.nvlsBw, 0.02 * nv.nvlsBw);
  Hardware a100 = hw;
  a100.eff = defaultEfficiency("A100_80GB");
  Link ring = groupLink(a100, 8, 8);
  EXPECT_EQ(ring.nvlsBw, 0);
  EXPECT_NEAR(allReduceBusBw(8e9, 8, ring), ring.bw, 0.02 * ring.bw);
  EXPECT_LT(allReduceBusBw(8e3, 8, nv), 0.1 * nv.bw);
  // Across nodes, every GPU's NIC carries traffic: 8 per node give 8x one
  // NIC (up to NVLink); a strided group with one GPU per node gets one NIC.
  Link wide = groupLink(hw, 32, 8), thin = groupLink(hw, 4, 1);
  EXPECT_NEAR(wide.bw, std::min(nv.bw, 8 * hw.networkBw * hw.eff.network), 1);
  EXPECT_NEAR(thin.bw, hw.networkBw * hw.eff.network, 1);
  EXPECT_EQ(membersPerNode(0, 4, 8, 8), 1);
  EXPECT_EQ(membersPerNode(0, 16, 1, 8), 8);
  EXPECT_EQ(membersPerNode(0, 8, 1, 8), 8);
  EXPECT_EQ(membersPerNode(0, 8, 2, 8), 4);
  // A mesh starting mid-node: the first node holds fewer of the group, and
  // its NICs carry the group's traffic across.
  EXPECT_EQ(membersPerNode(4, 6, 2, 8), 2);  // 4 6 | 8 10 12 14
  EXPECT_EQ(membersPerNode(4, 12, 1, 8), 4); // 4..7 | 8..15
  EXPECT_EQ(membersPerNode(0, 3, 4, 8), 1);  // 0 4 | 8
  EXPECT_GT(allReduce(1e9, 16, net), allReduce(1e9, 8, nv));
}

TEST(CostModel, ReallocMovesOnlyWhatChanges) {
  Arch a = llama2_7b();
  Hardware hw = h100();
  Strategy tp8 = layout(1, 8, 1), dp8 = layout(8, 1, 1);
  MoveEstimate same = estimateRealloc(a, hw, tp8, tp8);
  EXPECT_EQ(same.intraNodeBytes + same.interNodeBytes, 0);
  EXPECT_EQ(same.time, 0);
  // tp=8 -> dp=8 on one node: each GPU already holds 1/8 of the sharded
  // weights and gathers the rest over NVLink; nothing crosses nodes.
  MoveEstimate gather = estimateRealloc(a, hw, tp8, dp8);
  EXPECT_EQ(gather.interNodeBytes, 0);
  EXPECT_GT(gather.intraNodeBytes, 0);
  EXPECT_NEAR(gather.intraNodeBytes + gather.localBytes, 8 * 2 * a.totalParams,
              0.001 * 8 * 2 * a.totalParams);
  // Moving to the other node uses the network.
  Strategy otherNode = tp8;
  otherNode.firstGpu = 8;
  MoveEstimate cross = estimateRealloc(a, hw, tp8, otherNode);
  EXPECT_NEAR(cross.interNodeBytes, 2 * a.totalParams, 0.001 * 2 * a.totalParams);
  EXPECT_GT(cross.time, gather.time / 4);
}

// The search uses a fast estimate; it must agree with the exact plan.
TEST(CostModel, FastReallocEstimateTracksTheExactPlan) {
  Arch a = llama2_13b();
  Hardware hw = h100();
  std::vector<Strategy> ls;
  for (auto [dp, tp, pp, first] :
       {std::tuple{1, 8, 1, 0}, {8, 1, 1, 0}, {2, 4, 1, 0}, {1, 4, 2, 8},
        {2, 2, 2, 8}, {4, 2, 2, 0}, {1, 2, 4, 4}, {16, 1, 1, 0}}) {
    Strategy s = layout(dp, tp, pp);
    s.firstGpu = first;
    ls.push_back(s);
  }
  for (const Strategy &f : ls)
    for (const Strategy &t : ls) {
      MoveEstimate exact = estimateRealloc(a, hw, f, t);
      MoveEstimate fast = estimateReallocFast(a, hw, f, t);
      double moved = exact.intraNodeBytes + exact.interNodeBytes;
      double fastMoved = fast.intraNodeBytes + fast.interNodeBytes;
      EXPECT_NEAR(fastMoved, moved, 0.01 * 2 * a.totalParams * 16)
          << f.dp << f.tp << f.pp << "@" << f.firstGpu << " -> " << t.dp << t.tp
          << t.pp << "@" << t.firstGpu;
      if (exact.time > 0)
        EXPECT_NEAR(fast.time / exact.time, 1.0, 0.35)
            << f.dp << f.tp << f.pp << "@" << f.firstGpu << " -> " << t.dp << t.tp
            << t.pp << "@" << t.firstGpu << " inter " << exact.interNodeBytes;
    }
}

} // namespace
