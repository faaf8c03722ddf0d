//===- Model.cpp - a tensor-parallel LLaMA decoder in LibTorch ------------===//
//
// Parameters, the decoder layers, forward passes (whole, per pipeline stage,
// per sp chunk) and per-token statistics; generation is in
// ModelGenerate.cpp.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Model.h"
#include "ParallelOps.h"
#include "RingAttention.h"

#include "rlhf/runtime/Error.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

using namespace rlhf;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

namespace {

/// One decoder layer whose activations are not kept: forward saves only its
/// input; backward runs the layer again with gradients on and backpropagates
/// through that (parameter gradients accumulate into the leaves as usual).
/// Tensor-parallel ranks replay the same collectives in the same order.
/// Only whole sequences are trained, so the attention is plain causal.
struct RecomputedLayer : torch::autograd::Function<RecomputedLayer> {
  static at::Tensor forward(AutogradContext *ctx, at::Tensor x, at::Tensor cos,
                            at::Tensor sin, int64_t model, int64_t l) {
    ctx->save_for_backward({x});
    ctx->saved_data["cos"] = cos;
    ctx->saved_data["sin"] = sin;
    ctx->saved_data["model"] = model;
    ctx->saved_data["layer"] = l;
    return reinterpret_cast<LlamaModel *>(model)->layer(int(l), x, cos, sin,
                                                        at::Tensor(), nullptr);
  }
  static tensor_list backward(AutogradContext *ctx, tensor_list g) {
    at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    auto *model =
        reinterpret_cast<LlamaModel *>(ctx->saved_data["model"].toInt());
    at::Tensor y;
    {
      at::AutoGradMode on(true);
      y = model->layer(int(ctx->saved_data["layer"].toInt()), x,
                       ctx->saved_data["cos"].toTensor(),
                       ctx->saved_data["sin"].toTensor(), at::Tensor(),
                       nullptr);
    }
    torch::autograd::backward({y}, {g[0]});
    return {x.grad(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

/// In fp32 whatever the compute dtype (as Megatron and HF LLaMA do), then
/// back to it for the weight.
at::Tensor rmsNorm(const at::Tensor &x, const at::Tensor &w, double eps) {
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor var = xf.pow(2).mean(-1, /*keepdim=*/true);
  return (xf * at::rsqrt(var + eps)).to(x.scalar_type()) * w;
}

/// Rotary inverse frequencies [headDim/2], fp32 as transformers computes
/// them; with LLaMA-3 scaling, long wavelengths are divided by the factor,
/// short ones kept and the band between interpolated.
at::Tensor ropeFrequencies(const ModelConfig &cfg, int64_t headDim) {
  at::Tensor inv =
      1.0 / at::pow(cfg.ropeTheta,
                    at::arange(0, headDim, 2, at::kLong).to(at::kFloat) /
                        double(headDim));
  const RopeScaling &r = cfg.rope;
  if (!r.enabled())
    return inv;
  const double orig = double(r.originalMaxPositions);
  const double lowWavelen = orig / r.lowFreqFactor,
               highWavelen = orig / r.highFreqFactor;
  at::Tensor wavelen = 2 * M_PI / inv;
  at::Tensor scaled = at::where(wavelen > lowWavelen, inv / r.factor, inv);
  at::Tensor smooth =
      (orig / wavelen - r.lowFreqFactor) / (r.highFreqFactor - r.lowFreqFactor);
  at::Tensor smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
  at::Tensor medium = (wavelen >= highWavelen) & (wavelen <= lowWavelen);
  return at::where(medium, smoothed, scaled);
}

at::Tensor rotateHalf(const at::Tensor &x) {
  int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

void checkLength(const ModelConfig &cfg, int64_t S) {
  if (S > cfg.maxSeq)
    throw Error("sequence of " + std::to_string(S) +
                " tokens exceeds max_seq " + std::to_string(cfg.maxSeq));
}

/// Where sp puts a sequence of S positions. Ring ranks hold the zigzag
/// layout's spans (balanced causal ring attention; one span with ring 1) and
/// the ulysses ranks of a ring rank split its spans' positions in order, so
/// the Ulysses all-to-all hands each ring rank exactly its spans. Zigzag
/// needs S a multiple of 2 x ring, which a multiple of sp is not when
/// S/ring is odd: the sequence is then padded at its end, after every real
/// position, so causal attention leaves the real outputs unchanged.
struct SpSplit {
  int64_t length;                   ///< S with the padding
  parallel::RingLayout ring;        ///< the positions of each ring rank
  std::vector<parallel::Span> mine; ///< this sp rank's, in order

  SpSplit(const SequenceParallel &sp, int64_t S) {
    if (S % sp.size)
      throw Error("sequence of " + std::to_string(S) +
                  " tokens does not split into " + std::to_string(sp.size) +
                  " equal chunks for sequence parallelism; pad it to a "
                  "multiple of sp");
    const int64_t unit =
        sp.ringSize > 1 ? std::lcm<int64_t>(sp.size, 2 * sp.ringSize) : 1;
    length = (S + unit - 1) / unit * unit;
    ring = parallel::zigzagLayout(length, sp.ringSize);
    int64_t skip = sp.ulyssesRank() * (length / sp.size),
            left = length / sp.size;
    for (const parallel::Span &s : ring[size_t(sp.ringRank())]) {
      const int64_t from = std::clamp<int64_t>(skip, 0, s.size),
                    n = std::min(s.size - from, left);
      if (n)
        mine.push_back({s.first + from, n});
      skip -= s.size;
      left -= n;
    }
  }

  /// This rank's positions of `t` [B, S], padded with zeros.
  at::Tensor local(const at::Tensor &t) const {
    at::Tensor padded = at::constant_pad_nd(t, {0, length - t.size(1)});
    std::vector<at::Tensor> parts;
    for (const parallel::Span &s : mine)
      parts.push_back(padded.narrow(1, s.first, s.size));
    return at::cat(parts, 1);
  }

  /// The first `keep` positions of `t` gathered over sp (in sp rank order:
  /// every ring rank's spans in turn) in sequence order.
  at::Tensor inOrder(const at::Tensor &t, int64_t keep) const {
    std::vector<std::pair<int64_t, at::Tensor>> parts;
    int64_t offset = 0;
    for (const std::vector<parallel::Span> &spans : ring)
      for (const parallel::Span &s : spans) {
        parts.push_back({s.first, t.narrow(1, offset, s.size)});
        offset += s.size;
      }
    std::sort(parts.begin(), parts.end(),
              [](const auto &a, const auto &b) { return a.first < b.first; });
    std::vector<at::Tensor> sorted;
    for (auto &[first, part] : parts)
      sorted.push_back(part);
    return at::cat(sorted, 1).narrow(1, 0, keep);
  }
};

} // namespace

ParamMap rlhf::initParams(const ModelConfig &cfg, uint64_t seed) {
  ParamMap out;
  for (const ParamSpec &p : llamaParams(cfg.shape)) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(
        seed ^ (std::hash<std::string>{}(p.name) * 0x9E3779B97F4A7C15ull));
    at::Tensor t;
    if (p.name.find("norm") != std::string::npos)
      t = at::ones({p.rows}, at::kFloat);
    else if (p.vector()) // biases
      t = at::normal(0.0, 0.02, {p.rows}, gen, at::kFloat);
    else
      t = at::normal(0.0, 0.02, {p.rows, p.cols}, gen, at::kFloat);
    out[p.name] = t;
  }
  return out;
}

ModelConfig rlhf::modelConfigOf(const HfArch &arch, int64_t maxSeq) {
  ModelConfig cfg;
  cfg.shape = arch.shape;
  cfg.maxSeq = maxSeq;
  cfg.ropeTheta = arch.ropeTheta;
  cfg.normEps = arch.normEps;
  cfg.rope = arch.rope;
  return cfg;
}

ParamMap rlhf::toDevice(ParamMap params, c10::Device device,
                        std::optional<at::ScalarType> dtype) {
  for (auto &[n, t] : params)
    if (t.defined())
      t = t.to(device, dtype.value_or(t.scalar_type()));
  return params;
}

ParamMap rlhf::shardParams(const ModelConfig &cfg, const ParamMap &full,
                           int tpRank, int tpSize) {
  ParamMap out;
  for (const ParamSpec &p : llamaParams(cfg.shape)) {
    const at::Tensor &t = full.at(p.name);
    switch (p.shard) {
    case Shard::Replicated:
      out[p.name] = t.clone();
      break;
    case Shard::Dim0: {
      int64_t n = t.size(0) / tpSize;
      out[p.name] = t.narrow(0, tpRank * n, n).clone();
      break;
    }
    case Shard::Dim1: {
      int64_t n = t.size(1) / tpSize;
      out[p.name] = t.narrow(1, tpRank * n, n).clone();
      break;
    }
    }
  }
  return out;
}

LlamaModel::LlamaModel(ModelConfig c, ParamMap shard, TensorParallel t,
                       PipelineParallel pl, SequenceParallel s)
    : cfg(std::move(c)), params_(std::move(shard)), tp(t), pp(pl), sp(s) {
  layerBegin = cfg.shape.layers;
  for (int l = 0; l < cfg.shape.layers; ++l)
    if (stageOf(l, cfg.shape.layers, pp.stages) == pp.stage) {
      layerBegin = std::min(layerBegin, l);
      layerEnd = l + 1;
    }
  if (pp.stages > 1 && !pp.comm)
    throw Error("pipeline parallelism needs a communicator");
  if (pp.stages > 1 && cfg.shape.tieEmbeddings)
    throw Error("tied embeddings with pipeline stages are not supported: the "
                "first and last stage would share the embedding");
  const ModelShape &m = cfg.shape;
  if (m.heads % tp.size || m.kvHeads % tp.size || m.vocab % tp.size ||
      m.ffn % tp.size)
    throw Error(
        "tensor parallel size " + std::to_string(tp.size) +
        " does not divide the heads, kv heads, ffn and vocab of the model");
  if (tp.size > 1 && !tp.comm)
    throw Error("tensor parallel size > 1 needs a communicator");
  if (sp.ringSize < 1 || sp.size % sp.ringSize)
    throw Error("sequence parallel size " + std::to_string(sp.size) +
                " is not ulysses x ring with ring " +
                std::to_string(sp.ringSize) +
                ": pick a ring size that divides sp");
  if (sp.size > 1) {
    if (!sp.comm)
      throw Error("sequence parallel size > 1 needs a communicator");
    const int ulysses = sp.ulyssesSize();
    if ((m.heads / tp.size) % ulysses)
      throw Error("ulysses size " + std::to_string(ulysses) +
                  " does not divide the " + std::to_string(m.heads / tp.size) +
                  " attention heads of each tensor-parallel rank (Ulysses "
                  "needs heads divisible by tp x ulysses); move the rest of "
                  "sp to the ring");
    if (pp.stages > 1)
      throw Error("sequence parallelism with pipeline stages is not "
                  "supported yet: plan sp = 1 or pp = 1");
    checkSpGroups();
  } else {
    sp.ulysses = sp.ring = nullptr;
  }
  if (!params_.empty()) {
    device_ = params_.begin()->second.device();
    dtype_ = params_.begin()->second.scalar_type();
  }
}

void LlamaModel::checkSpGroups() {
  // A sub-group that is the whole group may be left out.
  const int ulysses = sp.ulyssesSize(), ring = sp.ringSize;
  auto resolve = [&](Communicator *&c, int size, int rank, bool whole,
                     const char *name, const std::string &members) {
    if (size == 1) {
      c = nullptr;
      return;
    }
    if (!c && whole)
      c = sp.comm;
    if (!c)
      throw Error(std::string("sequence parallel size ") +
                  std::to_string(sp.size) + " = " + std::to_string(ulysses) +
                  " ulysses x " + std::to_string(ring) + " ring needs the " +
                  name + " group's communicator: build it over sp ranks " +
                  members);
    if (c->size() != size || c->rank() != rank)
      throw Error(std::string("the ") + name + " group has rank " +
                  std::to_string(c->rank()) + " of " +
                  std::to_string(c->size()) + " where sp rank " +
                  std::to_string(sp.rank) + " needs rank " +
                  std::to_string(rank) + " of " + std::to_string(size) +
                  ": build it over sp ranks " + members + " in that order");
  };
  if (sp.comm->size() != sp.size || sp.comm->rank() != sp.rank)
    throw Error("the sequence parallel communicator has rank " +
                std::to_string(sp.comm->rank()) + " of " +
                std::to_string(sp.comm->size()) + ", not " +
                std::to_string(sp.rank) + " of " + std::to_string(sp.size) +
                ": pass the sp group's communicator and this rank's place in "
                "it");
  resolve(sp.ulysses, ulysses, sp.ulyssesRank(), ring == 1, "ulysses",
          "ring_rank x ulysses + 0..ulysses-1");
  resolve(sp.ring, ring, sp.ringRank(), ulysses == 1, "ring",
          "0..ring-1 x ulysses + ulysses_rank");
}

const at::Tensor &LlamaModel::p(const std::string &name) const {
  auto it = params_.find(name);
  if (it == params_.end())
    throw Error("model has no parameter '" + name + "'");
  return it->second;
}

at::Tensor LlamaModel::layer(int l, const at::Tensor &x, const at::Tensor &cos,
                             const at::Tensor &sin, const at::Tensor &mask,
                             KvCache *cache) {
  const ModelShape &m = cfg.shape;
  const std::string pre = "model.layers." + std::to_string(l) + ".";
  const int64_t B = x.size(0), S = x.size(1);
  const int64_t headDim = m.hidden / m.heads;
  const int64_t heads = m.heads / tp.size, kvHeads = m.kvHeads / tp.size;

  auto colIn = [&](const at::Tensor &v) {
    return tp.size > 1 ? parallel::copyToGroup(v, tp.comm) : v;
  };
  auto rowOut = [&](const at::Tensor &v) {
    return tp.size > 1 ? parallel::reduceFromGroup(v, tp.comm) : v;
  };

  at::Tensor h =
      colIn(rmsNorm(x, p(pre + "input_layernorm.weight"), cfg.normEps));
  // Column-parallel projections: a bias is sharded as its rows are.
  auto project = [&](const char *name, int64_t n) {
    const std::string w = pre + "self_attn." + name;
    at::Tensor y = m.qkvBias ? at::linear(h, p(w + ".weight"), p(w + ".bias"))
                             : at::linear(h, p(w + ".weight"));
    return y.view({B, S, n, headDim}).transpose(1, 2);
  };
  at::Tensor q = project("q_proj", heads);
  at::Tensor k = project("k_proj", kvHeads);
  at::Tensor v = project("v_proj", kvHeads);
  q = q * cos + rotateHalf(q) * sin;
  k = k * cos + rotateHalf(k) * sin;
  if (cache) {
    if (int(cache->keys.size()) <= l) {
      cache->keys.resize(l + 1);
      cache->values.resize(l + 1);
    }
    const int64_t t0 = cache->length;
    if (t0 + S > cache->capacity)
      throw Error("KV cache of " + std::to_string(cache->capacity) +
                  " positions cannot take " + std::to_string(t0 + S));
    // Zeros: masked positions of a fixed window must hold no NaN, which a
    // -inf mask would not cancel.
    if (!cache->keys[l].defined()) {
      cache->keys[l] =
          at::zeros({B, kvHeads, cache->capacity, headDim}, k.options());
      cache->values[l] =
          at::zeros({B, kvHeads, cache->capacity, headDim}, v.options());
    }
    if (cache->slot.defined()) {
      cache->keys[l].index_copy_(2, cache->slot, k);
      cache->values[l].index_copy_(2, cache->slot, v);
      k = cache->keys[l].narrow(2, 0, cache->window);
      v = cache->values[l].narrow(2, 0, cache->window);
    } else {
      cache->keys[l].narrow(2, t0, S).copy_(k);
      cache->values[l].narrow(2, t0, S).copy_(v);
      k = cache->keys[l].narrow(2, 0, t0 + S);
      v = cache->values[l].narrow(2, 0, t0 + S);
    }
  }
  if (sp.size > 1) {
    if (cache || mask.defined())
      throw Error("sequence parallelism runs whole causal sequences only");
    // Ulysses: trade this chunk of positions for a 1/ulysses share of the
    // heads over the ring rank's positions, trade back below.
    if (sp.ulysses)
      parallel::ulyssesToHeads(q, k, v, sp.ulysses);
  }
  at::Tensor attn;
  if (sp.ring) {
    // Across the ring: this ring rank's zigzag chunks' queries over every
    // chunk's keys (q holds 1/ring of the padded sequence).
    attn = parallel::ringAttention(
        q, k, v, sp.ring,
        parallel::zigzagLayout(q.size(2) * sp.ringSize, sp.ringSize));
  } else {
    if (k.size(1) != q.size(1)) {
      int64_t rep = q.size(1) / k.size(1);
      k = k.repeat_interleave(rep, 1);
      v = v.repeat_interleave(rep, 1);
    }
    // Scaled dot-product attention (flash where the device has it): causal
    // when no mask is given (whole sequences), else the additive mask of
    // left-padded generation. LibTorch accumulates the softmax in fp32.
    attn = mask.defined()
               ? at::scaled_dot_product_attention(
                     q, k, v,
                     mask.scalar_type() == q.scalar_type()
                         ? mask
                         : mask.to(q.scalar_type()))
               : at::scaled_dot_product_attention(q, k, v, {}, 0.0,
                                                  /*is_causal=*/true);
  }
  attn = attn.transpose(1, 2); // [B, positions, heads here, D]
  if (sp.ulysses)
    attn = parallel::headsToSeq(attn, sp.ulysses);
  attn = attn.reshape({B, S, heads * headDim});
  at::Tensor x2 =
      x + rowOut(at::linear(attn, p(pre + "self_attn.o_proj.weight")));

  at::Tensor h2 = colIn(
      rmsNorm(x2, p(pre + "post_attention_layernorm.weight"), cfg.normEps));
  at::Tensor gate = at::linear(h2, p(pre + "mlp.gate_proj.weight"));
  at::Tensor up = at::linear(h2, p(pre + "mlp.up_proj.weight"));
  at::Tensor mlp =
      at::linear(at::silu(gate) * up, p(pre + "mlp.down_proj.weight"));
  return x2 + rowOut(mlp);
}

at::Tensor LlamaModel::hidden(const at::Tensor &tokens,
                              const at::Tensor &positions,
                              const at::Tensor &mask, KvCache *cache) {
  return layers(embed(tokens), positions, mask, cache, /*finalNorm=*/true);
}

at::Tensor LlamaModel::embed(const at::Tensor &tokens) {
  // Vocab-parallel embedding: each rank looks up its rows, the rest are 0.
  const at::Tensor &emb = p("model.embed_tokens.weight");
  int64_t rows = emb.size(0), lo = tp.rank * rows;
  at::Tensor local = tokens - lo;
  at::Tensor inRange = (local >= 0) & (local < rows);
  at::Tensor x = at::embedding(emb, local.clamp(0, rows - 1)) *
                 inRange.unsqueeze(-1).to(emb.scalar_type());
  if (tp.size > 1)
    x = parallel::reduceFromGroup(x, tp.comm);
  return x;
}

at::Tensor LlamaModel::layers(at::Tensor x, const at::Tensor &positions,
                              const at::Tensor &mask, KvCache *cache,
                              bool finalNorm) {
  const ModelShape &m = cfg.shape;
  // Rotary tables for these positions: [B, 1, S, headDim].
  const int64_t headDim = m.hidden / m.heads;
  at::Tensor inv = ropeFrequencies(cfg, headDim).to(device_);
  at::Tensor freqs = positions.to(at::kFloat).unsqueeze(-1) * inv; // [B,S,hd/2]
  at::Tensor angles = at::cat({freqs, freqs}, -1).unsqueeze(1);
  at::Tensor cos = angles.cos().to(dtype_), sin = angles.sin().to(dtype_);
  // Replay only whole sequences (no cache, causal mask): training.
  const bool replay =
      recompute && !cache && !mask.defined() && at::GradMode::is_enabled();
  for (int l = layerBegin; l < layerEnd; ++l)
    x = replay ? RecomputedLayer::apply(x, cos, sin,
                                        reinterpret_cast<int64_t>(this), l)
               : layer(l, x, cos, sin, mask, cache);
  if (cache && !cache->slot.defined()) // every layer wrote these positions
    cache->length += x.size(1);
  return finalNorm ? rmsNorm(x, p("model.norm.weight"), cfg.normEps) : x;
}

at::Tensor LlamaModel::head(const at::Tensor &x) {
  // Logits and values leave in fp32: log-softmax and losses need it.
  if (cfg.shape.valueHead)
    return at::linear(x, p("value_head.weight")).squeeze(-1).to(at::kFloat);
  at::Tensor logits = logitsShard(x);
  return tp.size > 1 ? parallel::gatherDim(logits, tp.comm, -1) : logits;
}

at::Tensor LlamaModel::logitsShard(const at::Tensor &x) {
  const at::Tensor &w = cfg.shape.tieEmbeddings ? p("model.embed_tokens.weight")
                                                : p("lm_head.weight");
  return at::linear(tp.size > 1 ? parallel::copyToGroup(x, tp.comm) : x, w)
      .to(at::kFloat);
}

at::Tensor LlamaModel::forward(const at::Tensor &tokensIn,
                               const c10::optional<at::Tensor> &positionsIn) {
  const at::Tensor tokens = tokensIn.to(device_);
  const int64_t B = tokens.size(0), S = tokens.size(1);
  checkLength(cfg, S);
  at::Tensor positions =
      positionsIn ? positionsIn->to(device_)
                  : at::arange(S, on(at::kLong)).unsqueeze(0).expand({B, S});
  if (pp.stages > 1) {
    StageActivations a = stageForward(tokens);
    return lastStage() ? a.output : at::Tensor();
  }
  if (sp.size > 1) {
    // This rank's positions at their global positions. The whole logits
    // are gathered, so their memory is not divided by sp: losses and
    // inference read per-token log-probs through tokenStat instead.
    const SpSplit split(sp, S);
    at::Tensor x = hidden(split.local(tokens), split.local(positions),
                          /*mask: causal=*/at::Tensor(), nullptr);
    return split.inOrder(parallel::gatherDim(head(x), sp.comm, 1), S);
  }
  return head(
      hidden(tokens, positions, /*mask: causal=*/at::Tensor(), nullptr));
}

TokenStats LlamaModel::tokenStats(const at::Tensor &tokensIn, bool logprobs,
                                  bool entropy) {
  const at::Tensor tokens = tokensIn.to(device_);
  const int64_t B = tokens.size(0), S = tokens.size(1);
  // The next tokens; the last position of the sequence has none (a
  // placeholder id, its column dropped at the end).
  const at::Tensor next = at::cat(
      {tokens.narrow(1, 1, S - 1), at::zeros({B, 1}, tokens.options())}, 1);
  // The statistics asked for, from one set of logits: the whole vocabulary,
  // or under tp this rank's shard of it (vocabulary-parallel, so no rank
  // holds [B, S, V], as the cost model counts the logits).
  auto stats = [&](const at::Tensor &logits, const at::Tensor &next,
                   bool sharded) {
    TokenStats r;
    if (sharded) {
      const int64_t offset = tp.rank * (cfg.shape.vocab / tp.size);
      if (logprobs)
        r.logprobs =
            parallel::vocabParallelStat(logits, next, offset, tp.comm, false);
      if (entropy)
        r.entropy =
            parallel::vocabParallelStat(logits, next, offset, tp.comm, true);
      return r;
    }
    at::Tensor lp = at::log_softmax(logits, -1);
    if (logprobs)
      r.logprobs = lp.gather(-1, next.unsqueeze(-1)).squeeze(-1);
    if (entropy)
      r.entropy = -(lp.exp() * lp).sum(-1);
    return r;
  };
  auto each = [](TokenStats r, const std::function<at::Tensor(at::Tensor)> &f) {
    for (at::Tensor *t : {&r.logprobs, &r.entropy})
      if (t->defined())
        *t = f(*t);
    return r;
  };
  auto drop = [&](at::Tensor t) { return t.narrow(1, 0, S - 1); };
  if (cfg.shape.valueHead || pp.stages > 1 || (sp.size <= 1 && tp.size <= 1))
    return each(stats(forward(tokens), next, false), drop);
  checkLength(cfg, S);
  auto logitsOf = [&](const at::Tensor &x) {
    return tp.size > 1 ? logitsShard(x) : head(x);
  };
  at::Tensor positions =
      at::arange(S, on(at::kLong)).unsqueeze(0).expand({B, S});
  if (sp.size <= 1)
    return each(stats(logitsOf(hidden(tokens, positions,
                                      /*mask: causal=*/at::Tensor(), nullptr)),
                      next, tp.size > 1),
                drop);
  // Under sp each rank computes its positions' columns; only those are
  // gathered.
  const SpSplit split(sp, S);
  at::Tensor x = hidden(split.local(tokens), split.local(positions),
                        /*mask: causal=*/at::Tensor(), nullptr);
  return each(stats(logitsOf(x), split.local(next), tp.size > 1),
              [&](at::Tensor t) {
                return split.inOrder(parallel::gatherDim(t, sp.comm, 1), S - 1);
              });
}

at::Tensor LlamaModel::tokenStat(const at::Tensor &tokens, bool entropy) {
  TokenStats r = tokenStats(tokens, !entropy, entropy);
  return entropy ? r.entropy : r.logprobs;
}

StageActivations LlamaModel::stageForward(const at::Tensor &tokensIn) {
  const at::Tensor tokens = tokensIn.to(device_);
  const int64_t B = tokens.size(0), S = tokens.size(1);
  at::Tensor positions =
      at::arange(S, on(at::kLong)).unsqueeze(0).expand({B, S});
  const at::Tensor mask; // causal
  StageActivations a;
  at::Tensor x;
  if (firstStage()) {
    x = embed(tokens);
  } else {
    a.input = at::empty({B, S, cfg.shape.hidden}, on(dtype_));
    pp.comm->recv(a.input, pp.stage - 1);
    a.input.set_requires_grad(at::GradMode::is_enabled());
    x = a.input;
  }
  x = layers(x, positions, mask, nullptr, /*finalNorm=*/lastStage());
  if (lastStage()) {
    a.output = head(x);
  } else {
    a.output = x;
    pp.comm->send(x.detach(), pp.stage + 1);
  }
  return a;
}

void LlamaModel::stageBackward(const StageActivations &a) {
  if (!lastStage()) {
    at::Tensor grad = at::empty_like(a.output);
    pp.comm->recv(grad, pp.stage + 1);
    a.output.backward(grad);
  }
  if (!firstStage()) {
    at::Tensor g = a.input.grad();
    pp.comm->send(g.defined() ? g : at::zeros_like(a.input), pp.stage - 1);
  }
}
