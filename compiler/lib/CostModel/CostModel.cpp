//===- CostModel.cpp - analytic time and memory of RLHF calls -------------===//
//
// Formulas and assumptions are written up in docs/cost-model.md; keep the two
// in step.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/CostModel/CostModel.h"
#include "rlhf/IR/RLHFOps.h"
#include "rlhf/runtime/LogitChunks.h"
#include "rlhf/runtime/SeqSplit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace rlhfc::cost;

namespace {

constexpr double kBf16 = 2.0;
/// Activation bytes per token per layer without recomputation, with
/// FlashAttention (no s^2 score matrix) and sequence parallelism
/// (Korthikanti et al. 2022, eq. 2 without the 5as/h term).
constexpr double kActBytesPerTokenHidden = 34.0;
/// Of those, what a rank holds whole when tp does not shard positions (the
/// runtime's generation): the two norms' and the two column-parallel
/// projections' inputs, bf16.
constexpr double kActBytesWholeOverTp = 8.0;
/// fp32 master weights, Adam m and v.
constexpr double kOptimizerBytesPerParam = 12.0;
/// Gradients accumulate over micro-batches in fp32 (Megatron's main_grad,
/// the runtime's too) and travel in bf16.
constexpr double kGradBytesPerParam = 4.0;
/// Adam's update reads and writes master weights, m, v, and the gradient.
constexpr double kOptimizerTrafficPerParam = 32.0;
/// The runtime's fused lm head computes the fp32 logits of at most
/// rlhf::logitChunkBytes(V / tp) of positions at a time; forward holds about
/// two such chunks (bf16 and fp32 logits, the log-sum-exp's exponentials),
/// backward three (the recomputed logits, their softmax, its gradient),
/// measured on the CPU by rlhf-bench-gpu-runtime --probe.
constexpr double kLogitChunksForward = 2.0, kLogitChunksBackward = 3.0;
/// Generation's sampler takes rows of the last logits in chunks of at most
/// rlhf::kSampleChunkBytes; top-p's sort and the fp64 CDF hold about 7.2
/// such chunks, greedy decoding's log-softmax one (SamplingTest, on the
/// CPU).
constexpr double kSampleChunks = 7.2, kGreedyChunks = 1.0;

// Sequence-parallel ranks hold weights as data-parallel ones do.
rlhf::Layout layoutOf(const Strategy &s) {
  return rlhf::Layout{s.firstGpu, s.dp * s.sp, s.tp, s.pp};
}

} // namespace

Arch Arch::get(const rlhf::ModelShape &m, int64_t maxSeq) {
  Arch a;
  a.shape = m;
  a.maxSeq = maxSeq;
  double h = double(m.hidden), headDim = double(m.hidden) / m.heads;
  double kvDim = m.kvHeads * headDim;
  a.layerParams = 2 * h * h + 2 * h * kvDim + 3 * h * m.ffn + 2 * h +
                  (m.qkvBias ? h + 2 * kvDim : 0.0);
  a.embedParams = double(m.vocab) * h;
  a.headParams = m.valueHead ? h : (m.tieEmbeddings ? 0 : double(m.vocab) * h);
  a.headGemmParams = m.valueHead ? h : double(m.vocab) * h;
  a.totalParams = m.layers * a.layerParams + a.embedParams + h + a.headParams;
  a.kvBytesPerToken = 2 * m.layers * kvDim * kBf16;
  return a;
}

double rlhfc::cost::gemmUtilization(double m, double n, double k,
                                    const Efficiency &e) {
  if (m <= 0 || n <= 0 || k <= 0)
    return 1.0;
  return -std::expm1(-m * n / e.gemmFill) * k / (k + e.gemmDepth);
}

/// One run of the call.
static Estimate estimateOnce(const Arch &a, const Hardware &hw,
                             const Strategy &s, const CallShape &c) {
  Estimate e;
  const rlhf::ModelShape &m = a.shape;
  const double h = double(m.hidden), L = double(m.layers), V = double(m.vocab);
  const int64_t tp = s.tp, pp = s.pp, dp = s.dp, sp = s.sp;
  const double flopRate = hw.flops * hw.eff.matmul;
  const double memRate = hw.hbmBw * hw.eff.hbm;
  const double stageLayers = std::ceil(L / pp);
  // With one stage it holds everything; otherwise the first stage holds the
  // embedding and the last the final norm and head, and the larger decides.
  const double stageParams =
      stageLayers * a.layerParams +
      (pp == 1 ? a.embedParams + a.headParams + h
               : std::max(a.embedParams, a.headParams + h));
  const double kvHeadsPerRank = std::max(1.0, double(m.kvHeads) / tp);
  // Megatron's sequence parallelism, as the runtime runs it
  // (TensorParallel::shardSequence): whole-sequence passes under tp hold
  // norms, residual adds and the layers' saved inputs on 1/tp of the
  // positions (of each sp rank's chunk, under Ulysses or ring sp); not in
  // generation, whose prefill runs through the KV cache.
  const bool seqShards = s.shardSequence && tp > 1;
  // Activation bytes per token and hidden unit a rank holds of a layer,
  // `whole` of them held whole on every tp rank.
  auto actBytes = [&](double whole) {
    return (kActBytesPerTokenHidden - whole) / tp + whole;
  };
  const double wholeOverTp = seqShards ? 0.0 : kActBytesWholeOverTp;
  const double kvBytesPerTokenRank =
      2 * stageLayers * kvHeadsPerRank * (h / m.heads) * kBf16;

  // Links of the four kinds of group in this strategy. Ranks run dp-major,
  // then sp, pp and tp; gradients are summed over dp and sp alike.
  const int64_t gpn = hw.gpusPerNode;
  const Link tpLink = groupLink(hw, tp, membersPerNode(s.firstGpu, tp, 1, gpn));
  const Link ppLink = groupLink(
      hw, 2, membersPerNode(s.firstGpu, pp, tp, gpn) >= pp ? 2 : 1);
  const Link dpLink =
      groupLink(hw, dp * sp, membersPerNode(s.firstGpu, dp * sp, tp * pp, gpn));
  // USP: Ulysses all-to-alls inside a node, ring steps between the Ulysses
  // groups. Ring neighbours sit ulysses * tp * pp GPUs apart; a ring that
  // leaves its node runs at its slowest hop, one GPU's NIC.
  const mlir::rlhf::SpSplit split =
      mlir::rlhf::splitSp(sp, tp, m.heads, gpn, s.firstGpu);
  const Link ulyssesLink = groupLink(
      hw, split.ulysses,
      membersPerNode(s.firstGpu, split.ulysses, tp * pp, gpn));
  const Link ringLink = groupLink(
      hw, 2,
      membersPerNode(s.firstGpu, split.ring, split.ulysses * tp * pp, gpn) >=
              split.ring
          ? 2
          : 1);
  // The tokens of a micro-batch one sp rank runs: 1/sp of the sequence as
  // the runtime pads it for sp (SeqSplit.h).
  const double spTokens =
      sp > 1 && c.seqLen > 0
          ? double(rlhf::spPaddedLength(c.seqLen, sp, split.ring,
                                        seqShards ? tp : 1)) /
                double(c.seqLen) / double(sp)
          : 1.0 / double(sp);

  // Forward FLOPs of `tokens` tokens with attention over `ctx` positions:
  // matmuls 2*params per token plus 4*ctx*h per token per layer for QK^T and
  // AV (Megatron-LM's count), plus the logits.
  auto layerGemmFlops = [&](double tokens) {
    return 2.0 * tokens * L * (a.layerParams - 2 * h);
  };
  auto headGemmFlops = [&](double tokens) {
    return 2.0 * tokens * a.headGemmParams;
  };
  auto gemmFlops = [&](double tokens) {
    return layerGemmFlops(tokens) + headGemmFlops(tokens);
  };
  auto fwdFlops = [&](double tokens, double ctx) {
    return gemmFlops(tokens) + 4.0 * tokens * ctx * h * L;
  };

  const double weightsRank = kBf16 * stageParams / tp;
  e.memory.weights = weightsRank;

  // What the head's output holds for `tokens` positions of a micro-batch:
  // the fused head's chunks (of the rank's vocabulary shard under tp), on a
  // pipeline's last stage too. A value head: a value per position.
  auto logitBytes = [&](double tokens, bool train) {
    if (m.valueHead)
      return tokens * 4.0;
    const double whole = tokens * V / tp * 4.0;
    return std::min(whole, double(rlhf::logitChunkBytes(int64_t(V / tp)))) *
           (train ? kLogitChunksBackward : kLogitChunksForward);
  };

  const double kvDim = m.kvHeads * (h / m.heads), ffn = double(m.ffn);
  // The kv width a tp rank's Ulysses group moves: ulyssesToHeads repeats
  // the kv heads up to a multiple of the Ulysses degree.
  const double kvUlysses =
      double(std::lcm(std::max<int64_t>(1, m.kvHeads / tp), split.ulysses)) *
      (h / m.heads);
  // Utilization of a layer's GEMMs on `rows` rows (tokens of a micro-batch,
  // or sequences of a decode step) per rank: q/k/v and gate/up are split by
  // output columns over tp, o and down by depth; weighted by their FLOPs.
  auto layerUtilization = [&](double rows) {
    const double gemms[4][3] = {{(h + 2 * kvDim) / tp, h, 0},
                                {h, h / tp, 0},
                                {2 * ffn / tp, h, 0},
                                {h, ffn / tp, 0}};
    double flops = 0, time = 0;
    for (const auto &g : gemms) {
      double f = g[0] * g[1];
      flops += f;
      time += f / gemmUtilization(rows, g[0], g[1], hw.eff);
    }
    return flops / time;
  };

  // Memory-bound passes over a stage's activations that no GEMM or attention
  // kernel does: per layer and token, two RMSNorms (read and write h), two
  // residual adds (read 2h, write h), rotary on q and k, and SwiGLU (read
  // the gate and up, write their product), in bf16; the head's fp32 logits
  // written and read once per head pass, whole: a pipeline's last stage
  // holds the head, and the slowest stage paces 1F1B (stageTime's GEMM term
  // spreads the head's FLOPs over the stages). Backward moves about twice the
  // forward's bytes, so training counts `passes` as the GEMMs do. Their
  // share of a layer grows as 1/h against the GEMMs' FLOPs: without them a
  // 2048-wide model's training was priced 23-28% fast (docs/cost-model.md).
  auto elementwiseTime = [&](double tokens, double passes, double headPasses,
                             bool sharded) {
    double layer =
        10 * h / (sharded ? tp : 1) + (2 * (h + kvDim) + 3 * ffn) / tp;
    double bytes = passes * stageLayers * tokens * layer * kBf16;
    if (!m.valueHead)
      bytes += headPasses * 2 * 4.0 * tokens * V / tp;
    return bytes / memRate;
  };

  // One pass of `tokensPerMb` tokens per micro-batch through the pipeline:
  // the per-stage time of one micro-batch, compute- or memory-bound, and no
  // faster than its kernels can be launched. GEMMs run at the matmul rate
  // and causal FlashAttention (forward once, backward 2.5 times its FLOPs,
  // recomputation once more) at the attention rate. With sp, each rank runs
  // 1/sp of the tokens and 1/sp of the attention. Every layer's attention
  // all-to-alls q, k, v in and its output back among the Ulysses ranks,
  // once per forward and backward pass, exposed: nothing runs beside them.
  // Across ring groups, K/V blocks circle while each step's blockwise
  // attention runs (ringExposed). The layers' GEMMs run `passes` times over
  // the tokens, the head's `headPasses` times (a fraction where it sees
  // some positions only, as in prefill).
  auto stageTime = [&](double tokensPerMb, double ctx, double passes,
                       double headPasses, int allReducesPerLayer,
                       bool sharded) {
    const double local = tokensPerMb * spTokens;
    double flops =
        (passes * layerGemmFlops(local) + headPasses * headGemmFlops(local)) /
        pp / tp;
    const double attnLayer = causalAttentionFlops(local, ctx, h, 1) / tp;
    const double attnPasses = passes > 1 ? passes + 0.5 : 1;
    double attn = attentionTime(attnPasses * stageLayers * attnLayer, hw);
    double compute = std::max(
        {flops / (flopRate * layerUtilization(local)) + attn +
             elementwiseTime(local, passes, headPasses, sharded),
         weightsRank / memRate, passes * stageLayers * hw.eff.kernelOverhead});
    double act = local * h * kBf16;
    double tpc = tp > 1 ? stageLayers * allReducesPerLayer * allReduce(act, tp, tpLink)
                        : 0.0;
    const double recomputed = passes > 3 ? 1 : 0;
    if (split.ulysses > 1) {
      double a2aBytes = local * (2 * h / tp + 2 * kvUlysses) * kBf16;
      double a2aPasses = passes > 1 ? passes - 1 : 1; // backward: once less
      tpc += a2aPasses * stageLayers *
             allToAll(a2aBytes, split.ulysses, ulyssesLink);
    }
    if (split.ring > 1) {
      // A block: the K and V of the ring group's T_mb/ring tokens, for the
      // kv heads of one Ulysses rank.
      double kvRank = kvUlysses / split.ulysses;
      double block = local * split.ulysses * 2 * kvRank * kBf16;
      double step = attentionTime(attnLayer, hw) / split.ring;
      double fwd = ringExposed(block, step, split.ring, ringLink);
      // Backward circles K/V and returns dK/dV over 2.5x the compute.
      double bwd = ringExposed(2 * block, 2.5 * step, split.ring, ringLink);
      tpc += stageLayers * (passes > 1 ? (1 + recomputed) * fwd + bwd : fwd);
    }
    double ppc = pp > 1 ? (passes > 1 ? 2 : 1) * p2p(act, ppLink) : 0.0;
    return std::make_tuple(compute, tpc, ppc);
  };

  switch (c.kind) {
  case CallKind::Inference: {
    double seqPerDp = double(c.batch) / dp;
    double mbs = std::max<int64_t>(1, s.microBatches);
    double tokensPerMb = seqPerDp * c.seqLen / mbs;
    auto [comp, tpc, ppc] =
        stageTime(tokensPerMb, c.seqLen, 1, 1, 2, seqShards);
    double steps = mbs + pp - 1;
    e.time.compute = steps * comp;
    e.time.tpComm = steps * tpc;
    e.time.ppComm = steps * ppc;
    e.flops = fwdFlops(double(c.batch) * c.seqLen, c.seqLen);
    e.memory.activations = tokensPerMb * spTokens * h * actBytes(wholeOverTp) +
                           logitBytes(tokensPerMb * spTokens, false);
    break;
  }
  case CallKind::Generate: {
    // mbs > 1 generates a dp rank's rows in waves, one after another, each
    // through every stage (the runtime's pipeline runs its stages one after
    // another) and with a KV cache of its own rows only.
    double seqPerDp = double(c.batch) / dp;
    double mbs = std::max<int64_t>(1, s.microBatches);
    double seqPerMb = seqPerDp / mbs;
    // Prefill: one compute-bound forward pass over the prompts.
    // Its head runs on each prompt's last position only.
    const double prefillHead = c.promptLen > 0 ? 1.0 / double(c.promptLen) : 0;
    auto [pComp, pTp, pPp] =
        stageTime(seqPerMb * c.promptLen, c.promptLen, 1, prefillHead, 2,
                  /*sharded=*/false);
    double pSteps = mbs * pp;
    // Decode: every step reads the stage's weights and the KV cache so far;
    // compute is 2 FLOPs per parameter per sequence plus attention.
    double avgCtx = c.promptLen + (c.genLen + 1) / 2.0;
    double stepFlops =
        2.0 * seqPerMb *
        (stageLayers * (a.layerParams - 2 * h) + a.headGemmParams / pp +
         2.0 * avgCtx * h * stageLayers) /
        tp;
    double stepBytes = weightsRank + seqPerMb * avgCtx * kvBytesPerTokenRank;
    // Decode kernels are tuned for few rows (split-K GEMV): no tile-fill
    // penalty, unlike the prefill and training GEMMs.
    double stepComp = std::max(stepFlops / flopRate, stepBytes / memRate) +
                      stageLayers * hw.eff.kernelOverhead;
    double act = seqPerMb * h * kBf16;
    double stepTp = tp > 1 ? stageLayers * 2 * allReduce(act, tp, tpLink) : 0.0;
    double stepPp = pp > 1 ? p2p(act, ppLink) : 0.0;
    // A token of a wave takes pp stage times.
    double dSteps = c.genLen * mbs * pp;
    e.time.compute = pSteps * pComp + dSteps * stepComp;
    e.time.tpComm = pSteps * pTp + dSteps * stepTp;
    e.time.ppComm = pSteps * pPp + dSteps * stepPp;
    e.flops = fwdFlops(double(c.batch) * c.promptLen, c.promptLen) -
              headGemmFlops(double(c.batch) * c.promptLen) +
              headGemmFlops(double(c.batch)) +
              2.0 * c.batch * c.genLen *
                  (L * (a.layerParams - 2 * h) + a.headGemmParams);
    e.memory.kvCache =
        seqPerMb * (c.promptLen + c.genLen) * kvBytesPerTokenRank;
    // Prefill's working set (one layer's activations, as inference, and
    // the additive mask of left-padded prompts, [B, P, P] in the compute
    // dtype whatever tp), then (its activations freed) the last position's
    // logits, gathered over tp, and the sampler's chunks of them (greedy:
    // their log-softmax).
    const double prefill =
        seqPerMb * c.promptLen * h * actBytes(kActBytesWholeOverTp) +
        seqPerMb * c.promptLen * c.promptLen * kBf16;
    const double lastLogits = seqPerMb * V * 4.0;
    const double sampler =
        std::min(lastLogits, double(rlhf::kSampleChunkBytes)) *
        (c.greedy ? kGreedyChunks : kSampleChunks);
    e.memory.activations = std::max(prefill, lastLogits + sampler);
    break;
  }
  case CallKind::Train: {
    double seqPerDp = double(c.batch) / dp / std::max<int64_t>(1, c.minibatches);
    double mbs = std::max<int64_t>(1, s.microBatches);
    double forwards = double(std::max<int64_t>(1, c.forwards));
    double tokensPerMb = seqPerDp * c.seqLen * forwards / mbs;
    double passes = s.recompute ? 4.0 : 3.0;
    // The fused lm head recomputes its logits in backward, recomputation or
    // not (runtime/lib/HeadStats.h); a value head keeps its output.
    double headPasses = m.valueHead ? passes : 4.0;
    // Per layer, forward and backward: two all-reduces each, or under
    // sequence sharding their all-gathers and reduce-scatters, plus backward
    // gathering the projections' inputs again (one all-reduce's bytes);
    // recomputation replays the forward's instead.
    auto [comp, tpc, ppc] =
        stageTime(tokensPerMb, c.seqLen, passes, headPasses,
                  s.recompute ? 6 : (seqShards ? 5 : 4), seqShards);
    double steps = mbs + pp - 1; // 1F1B: bubble of pp-1 micro-batch slots
    double localParams = stageParams / tp;
    double grads = kBf16 * localParams; // on the wire
    // ZeRO-1 replaces the all-reduce by a reduce-scatter, which overlaps
    // backward like it, and an all-gather of the updated slices after the
    // step, which cannot: each moves half an all-reduce's bytes.
    double hidden = s.zero ? 0.5 : 1.0, exposed = s.zero ? 0.5 : 0.0;
    double dpc = dp * sp > 1 ? ((1.0 - hw.eff.dpOverlap) * hidden + exposed) *
                                   allReduce(grads, dp * sp, dpLink)
                             : 0.0;
    double optState = localParams / (s.zero ? dp * sp : 1);
    double opt = optState * kOptimizerTrafficPerParam / memRate;
    double rounds = double(std::max<int64_t>(1, c.minibatches)) * c.epochs;
    e.time.compute = rounds * steps * comp;
    e.time.tpComm = rounds * steps * tpc;
    e.time.ppComm = rounds * steps * ppc;
    e.time.dpComm = rounds * dpc;
    e.time.optimizer = rounds * opt;
    e.flops = 3.0 * fwdFlops(double(c.batch) * c.seqLen * forwards, c.seqLen) *
              c.epochs;
    e.memory.grads = kGradBytesPerParam * localParams;
    e.memory.optimizer = kOptimizerBytesPerParam * optState;
    // 1F1B keeps min(pp, mbs) micro-batches of activations on stage 0.
    double inFlight = std::min<double>(pp, mbs);
    double local = tokensPerMb * spTokens;
    double perLayer = local * h * actBytes(wholeOverTp);
    double stored =
        s.recompute ? local * h * kBf16 / (seqShards ? tp : 1) : perLayer;
    // The layer being replayed keeps its projections' inputs as gathered
    // (half of what tp does not shard otherwise): it is freed right after.
    double replayed =
        local * h *
        actBytes(seqShards ? kActBytesWholeOverTp / 2 : kActBytesWholeOverTp);
    e.memory.activations = inFlight * stageLayers * stored +
                           (s.recompute ? replayed : 0.0) +
                           logitBytes(local, true);
    break;
  }
  }
  if (s.offload)
    e.time.load = hostLoadTime(weightsRank, hw);
  return e;
}

Estimate rlhfc::cost::estimateCall(const Arch &a, const Hardware &hw,
                                   const Strategy &s, const CallShape &c) {
  Estimate e = estimateOnce(a, hw, s, c);
  // Dynamic sampling repeats the call: its time and work, not its memory.
  if (c.repeats != 1.0) {
    for (double *t : {&e.time.compute, &e.time.tpComm, &e.time.ppComm,
                      &e.time.dpComm, &e.time.optimizer, &e.time.load})
      *t *= c.repeats;
    e.flops *= c.repeats;
  }
  return e;
}

double rlhfc::cost::hostLoadTime(double bytesPerGpu, const Hardware &hw) {
  if (bytesPerGpu <= 0)
    return 0;
  if (!(hw.hostBw > 0))
    return std::numeric_limits<double>::infinity();
  return bytesPerGpu / (hw.hostBw * hw.eff.host);
}

double rlhfc::cost::emaUpdateTime(const Arch &arch, const Hardware &hw,
                                  const Strategy &target,
                                  double weightBytesPerGpu) {
  const int64_t layersPerGpu = arch.shape.layers / target.pp;
  // Per tensor (runtime rlhf_ema): widen the source's copy (read 1, write 2),
  // lerp into the master (read 4, write 2), cast back (read 2, write 1).
  constexpr double kTrafficPerWeightByte = 12;
  return kTrafficPerWeightByte * weightBytesPerGpu / (hw.hbmBw * hw.eff.hbm) +
         double(layersPerGpu) * hw.eff.kernelOverhead;
}

MoveEstimate rlhfc::cost::estimateRealloc(const Arch &a, const Hardware &hw,
                                          const Strategy &from, const Strategy &to) {
  std::vector<rlhf::ParamSpec> params = rlhf::llamaParams(a.shape);
  rlhf::ReallocPlan plan = rlhf::planRealloc(
      params, layoutOf(from), layoutOf(to), a.shape.layers, hw.gpusPerNode);
  MoveEstimate m;
  m.intraNodeBytes = double(plan.intraNodeBytes);
  m.interNodeBytes = double(plan.interNodeBytes);
  m.localBytes = double(plan.localBytes);
  const Link nv = groupLink(hw, 2, 2), net = groupLink(hw, 2, 1);
  double worst = 0;
  for (size_t g = 0; g < plan.sendIntra.size(); ++g) {
    double intra = double(std::max(plan.sendIntra[g], plan.recvIntra[g])) / nv.bw;
    double inter = double(std::max(plan.sendInter[g], plan.recvInter[g])) / net.bw;
    worst = std::max(worst, intra + inter);
  }
  if (plan.intraNodeBytes + plan.interNodeBytes > 0)
    worst += plan.interNodeBytes ? net.latency : nv.latency;
  m.time = worst;
  return m;
}

MoveEstimate rlhfc::cost::estimateTransfer(double bytes, const Hardware &hw,
                                           const Strategy &from, const Strategy &to) {
  MoveEstimate m;
  bool sameMesh = from.firstGpu == to.firstGpu && from.devices() == to.devices() &&
                  from.dp == to.dp;
  if (sameMesh || bytes <= 0) {
    m.localBytes = bytes;
    return m;
  }
  int64_t lo = std::min(from.firstGpu, to.firstGpu);
  int64_t hi = std::max(from.firstGpu + from.devices(), to.firstGpu + to.devices());
  bool crossNode = lo / hw.gpusPerNode != (hi - 1) / hw.gpusPerNode;
  Link l = groupLink(hw, 2, crossNode ? 1 : 2);
  double perSender = bytes / from.dp, perReceiver = bytes / to.dp;
  m.time = std::max(perSender, perReceiver) / l.bw + l.latency;
  (crossNode ? m.interNodeBytes : m.intraNodeBytes) = bytes;
  return m;
}

MoveEstimate rlhfc::cost::estimateReallocFast(const Arch &a, const Hardware &hw,
                                              const Strategy &from,
                                              const Strategy &to) {
  MoveEstimate m;
  const int64_t L = a.shape.layers, gpn = hw.gpusPerNode;
  const double h = double(a.shape.hidden);
  const double sharded = a.layerParams - 2 * h, repl = 2 * h;
  const rlhf::Layout f = layoutOf(from), t = layoutOf(to);
  const Link nv = groupLink(hw, 2, 2), net = groupLink(hw, 2, 1);
  // Whether some replica of source stage `fs` has a GPU on `node`.
  auto stageOnNode = [&](int64_t fs, int64_t node) {
    for (int64_t d = 0; d < f.dp; ++d)
      if (f.gpu(d, fs, 0) / gpn <= node && node <= f.gpu(d, fs, f.tp - 1) / gpn)
        return true;
    return false;
  };
  std::vector<double> sendLoad(
      size_t(std::max(f.firstGpu + f.size(), t.firstGpu + t.size())), 0);
  double worstRecv = 0;
  for (int64_t d = 0; d < t.dp; ++d)
    for (int64_t st = 0; st < t.pp; ++st) {
      auto [l0, l1] = rlhf::stageLayers(st, L, t.pp);
      for (int64_t tr = 0; tr < t.tp; ++tr) {
        int64_t g = t.gpu(d, st, tr);
        // The share of this GPU's sharded slice it already holds.
        std::optional<rlhf::Layout::Coords> own = f.coordsOf(g);
        double frac = 0;
        if (own) {
          rlhf::Range want = rlhf::shardRange(rlhf::Shard::Dim0, tr, t.tp);
          rlhf::Range have = rlhf::shardRange(rlhf::Shard::Dim0, own->t, f.tp);
          frac = std::max(0.0, std::min(want.hi, have.hi) -
                                   std::max(want.lo, have.lo));
        }
        double intra = 0, inter = 0;
        for (int64_t fs = 0; fs < f.pp; ++fs) {
          auto [m0, m1] = rlhf::stageLayers(fs, L, f.pp);
          double layers = double(std::max<int64_t>(0, std::min(l1, m1) - std::max(l0, m0)));
          double need = layers * (sharded / t.tp + repl);
          if (st == 0 && fs == 0)
            need += a.embedParams / t.tp;
          if (st == t.pp - 1 && fs == f.pp - 1)
            need += a.headParams / (a.shape.valueHead ? 1 : t.tp) + h;
          if (need <= 0)
            continue;
          double local = 0;
          if (own && fs == own->s) {
            local = layers * (sharded * frac + repl);
            if (st == 0 && fs == 0)
              local += a.embedParams * frac;
            if (st == t.pp - 1 && fs == f.pp - 1)
              local += (a.shape.valueHead ? a.headParams : a.headParams * frac) + h;
          }
          double bytes = 2.0 * std::max(0.0, need - local);
          m.localBytes += 2.0 * std::min(local, need);
          bool sameNode = stageOnNode(fs, g / gpn);
          (sameNode ? intra : inter) += bytes;
          // The stage's dp replicas share the sending, round-robin.
          for (int64_t rd = 0; rd < f.dp; ++rd)
            sendLoad[f.gpu(rd, fs, 0)] +=
                bytes / f.dp / (sameNode ? nv.bw : net.bw);
        }
        m.intraNodeBytes += intra;
        m.interNodeBytes += inter;
        worstRecv = std::max(worstRecv, intra / nv.bw + inter / net.bw);
      }
    }
  // A source shard's sends spread over its tp ranks too.
  double worstSend = 0;
  for (double v : sendLoad)
    worstSend = std::max(worstSend, v / f.tp);
  double worst = std::max(worstRecv, worstSend);
  if (m.movedBytes() > 0)
    worst += m.interNodeBytes > 0 ? net.latency : nv.latency;
  m.time = worst;
  return m;
}
