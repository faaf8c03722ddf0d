//===- ReallocPlan.cpp - slice-level parameter reallocation plans ---------===//

#include "rlhf/runtime/ReallocPlan.h"

#include <algorithm>
#include <cmath>

using namespace rlhf;

std::vector<ParamSpec> rlhf::llamaParams(const ModelShape &m) {
  std::vector<ParamSpec> ps;
  int64_t headDim = m.heads ? m.hidden / m.heads : 0;
  int64_t kvDim = m.kvHeads * headDim;
  ps.push_back(
      {"model.embed_tokens.weight", m.vocab, m.hidden, -1, Shard::Dim0});
  for (int l = 0; l < m.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    ps.push_back(
        {p + "input_layernorm.weight", m.hidden, 1, l, Shard::Replicated});
    ps.push_back(
        {p + "self_attn.q_proj.weight", m.hidden, m.hidden, l, Shard::Dim0});
    ps.push_back(
        {p + "self_attn.k_proj.weight", kvDim, m.hidden, l, Shard::Dim0});
    ps.push_back(
        {p + "self_attn.v_proj.weight", kvDim, m.hidden, l, Shard::Dim0});
    if (m.qkvBias) {
      ps.push_back({p + "self_attn.q_proj.bias", m.hidden, 1, l, Shard::Dim0});
      ps.push_back({p + "self_attn.k_proj.bias", kvDim, 1, l, Shard::Dim0});
      ps.push_back({p + "self_attn.v_proj.bias", kvDim, 1, l, Shard::Dim0});
    }
    ps.push_back(
        {p + "self_attn.o_proj.weight", m.hidden, m.hidden, l, Shard::Dim1});
    ps.push_back({p + "post_attention_layernorm.weight", m.hidden, 1, l,
                  Shard::Replicated});
    ps.push_back({p + "mlp.gate_proj.weight", m.ffn, m.hidden, l, Shard::Dim0});
    ps.push_back({p + "mlp.up_proj.weight", m.ffn, m.hidden, l, Shard::Dim0});
    ps.push_back({p + "mlp.down_proj.weight", m.hidden, m.ffn, l, Shard::Dim1});
  }
  ps.push_back({"model.norm.weight", m.hidden, 1, -2, Shard::Replicated});
  if (m.valueHead)
    ps.push_back({"value_head.weight", 1, m.hidden, -2, Shard::Replicated});
  else if (!m.tieEmbeddings)
    ps.push_back({"lm_head.weight", m.vocab, m.hidden, -2, Shard::Dim0});
  return ps;
}

int64_t rlhf::parameterCount(const ModelShape &m) {
  int64_t n = 0;
  for (const ParamSpec &p : llamaParams(m))
    n += p.numel();
  return n;
}

int64_t rlhf::stageOf(int layer, int64_t layers, int64_t pp) {
  if (layer == -1)
    return 0;
  if (layer == -2)
    return pp - 1;
  // Stages take layers/pp each; the first layers%pp stages take one more.
  int64_t base = layers / pp, extra = layers % pp;
  int64_t boundary = extra * (base + 1);
  if (layer < boundary)
    return layer / (base + 1);
  return extra + (layer - boundary) / std::max<int64_t>(base, 1);
}

std::pair<int64_t, int64_t> rlhf::stageLayers(int64_t stage, int64_t layers,
                                              int64_t pp) {
  int64_t base = layers / pp, extra = layers % pp;
  int64_t lo = stage * base + std::min(stage, extra);
  return {lo, lo + base + (stage < extra ? 1 : 0)};
}

Range rlhf::shardRange(Shard s, int64_t t, int64_t tp) {
  if (s == Shard::Replicated)
    return {0, 1};
  return {double(t) / tp, double(t + 1) / tp};
}

ReallocPlan rlhf::planRealloc(const std::vector<ParamSpec> &params,
                              const Layout &from, const Layout &to,
                              int64_t layers, int64_t gpusPerNode,
                              int64_t bytesPerElement) {
  ReallocPlan plan;
  int64_t maxGpu =
      std::max(from.firstGpu + from.size(), to.firstGpu + to.size());
  plan.sendIntra.assign(maxGpu, 0);
  plan.recvIntra.assign(maxGpu, 0);
  plan.sendInter.assign(maxGpu, 0);
  plan.recvInter.assign(maxGpu, 0);
  auto node = [&](int64_t g) { return g / gpusPerNode; };
  // Round-robin over source replicas per (param, source shard), so dp copies
  // share the sending.
  std::vector<int64_t> turn(from.tp, 0);

  for (int pi = 0; pi < int(params.size()); ++pi) {
    const ParamSpec &p = params[pi];
    int64_t sStage = stageOf(p.layer, layers, from.pp);
    int64_t dStage = stageOf(p.layer, layers, to.pp);
    int64_t sTp = p.shard == Shard::Replicated ? 1 : from.tp;
    int64_t dTp = p.shard == Shard::Replicated ? 1 : to.tp;
    for (int64_t d = 0; d < to.dp; ++d)
      for (int64_t t = 0; t < to.tp; ++t) {
        int64_t dst = to.gpu(d, dStage, t);
        Range want =
            shardRange(p.shard, p.shard == Shard::Replicated ? 0 : t, dTp);
        for (int64_t st = 0; st < sTp; ++st) {
          Range have = shardRange(p.shard, st, sTp);
          double lo = std::max(want.lo, have.lo),
                 hi = std::min(want.hi, have.hi);
          if (hi <= lo)
            continue;
          int64_t bytes = int64_t(std::llround(double(p.numel()) * (hi - lo))) *
                          bytesPerElement;
          // Holders of this slice: every dp replica of the source stage, and
          // for replicated params every tp rank too.
          int64_t src = -1;
          auto consider = [&](int64_t g) {
            if (g == dst)
              src = g;
          };
          for (int64_t sd = 0; sd < from.dp && src < 0; ++sd)
            for (int64_t tt = 0; tt < from.tp && src < 0; ++tt)
              if (p.shard != Shard::Replicated ? tt == st : true)
                consider(from.gpu(sd, sStage, tt));
          if (src < 0) {
            // Prefer a holder on the destination's node, round-robin.
            std::vector<int64_t> same, other;
            for (int64_t sd = 0; sd < from.dp; ++sd)
              for (int64_t tt = 0; tt < from.tp; ++tt) {
                if (p.shard != Shard::Replicated && tt != st)
                  continue;
                int64_t g = from.gpu(sd, sStage, tt);
                (node(g) == node(dst) ? same : other).push_back(g);
              }
            std::vector<int64_t> &pool = same.empty() ? other : same;
            src = pool[turn[st % from.tp]++ % pool.size()];
          }
          SliceMove mv{pi, src, dst, lo, hi, bytes};
          plan.moves.push_back(mv);
          if (src == dst) {
            plan.localBytes += bytes;
          } else if (node(src) == node(dst)) {
            plan.intraNodeBytes += bytes;
            plan.sendIntra[src] += bytes;
            plan.recvIntra[dst] += bytes;
          } else {
            plan.interNodeBytes += bytes;
            plan.sendInter[src] += bytes;
            plan.recvInter[dst] += bytes;
          }
        }
      }
  }
  return plan;
}
