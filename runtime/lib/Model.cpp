//===- Model.cpp - a tensor-parallel LLaMA decoder in LibTorch ------------===//
//
// The decoder: embedding, layers (attention with Ulysses and ring under sp)
// and heads. Parameters and their shards are in ModelParams.cpp, whole
// forward passes and per-token statistics in ModelForward.cpp, generation
// in ModelGenerate.cpp.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Model.h"
#include "FusedOps.h"
#include "ParallelOps.h"
#include "RingAttention.h"
#include "rlhf/runtime/Attention.h"

#include "rlhf/runtime/Error.h"

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>

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
at::Tensor rmsNormOps(const at::Tensor &x, const at::Tensor &w, double eps) {
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor var = xf.pow(2).mean(-1, /*keepdim=*/true);
  return (xf * at::rsqrt(var + eps)).to(x.scalar_type()) * w;
}

/// `f` of `ins` keeping only the inputs for backward, which runs `f` again
/// with gradients on and differentiates that: the same ops, so the same
/// gradients bit for bit, without the intermediates autograd would keep
/// (RMSNorm's fp32 copy of its input and its normalised input, SwiGLU's
/// silu(gate)). Fused kernels do the same; the cost model's 34 bytes of
/// activations per token and hidden unit assume it.
template <typename F> struct Replayed : torch::autograd::Function<Replayed<F>> {
  static at::Tensor forward(AutogradContext *ctx, at::Tensor a, at::Tensor b,
                            double eps) {
    ctx->save_for_backward({a, b});
    ctx->saved_data["eps"] = eps;
    return F::run(a, b, eps);
  }
  static tensor_list backward(AutogradContext *ctx, tensor_list g) {
    auto saved = ctx->get_saved_variables();
    at::Tensor a = saved[0].detach().requires_grad_(saved[0].requires_grad()),
               b = saved[1].detach().requires_grad_(saved[1].requires_grad());
    at::Tensor y;
    {
      at::AutoGradMode on(true);
      y = F::run(a, b, ctx->saved_data["eps"].toDouble());
    }
    std::vector<at::Tensor> inputs;
    for (const at::Tensor &t : {a, b})
      if (t.requires_grad())
        inputs.push_back(t);
    tensor_list got = torch::autograd::grad({y}, inputs, {g[0]},
                                            /*retain_graph=*/false,
                                            /*create_graph=*/false,
                                            /*allow_unused=*/true);
    tensor_list out{at::Tensor(), at::Tensor(), at::Tensor()};
    size_t k = 0;
    if (a.requires_grad())
      out[0] = got[k++];
    if (b.requires_grad())
      out[1] = got[k++];
    return out;
  }
};

struct RmsNormOps {
  static at::Tensor run(const at::Tensor &x, const at::Tensor &w, double eps) {
    return rmsNormOps(x, w, eps);
  }
};
struct SwiGluOps {
  static at::Tensor run(const at::Tensor &gate, const at::Tensor &up, double) {
    return fused::swiGluOps(gate, up);
  }
};

bool needsGrad(const at::Tensor &a, const at::Tensor &b) {
  return at::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad());
}

/// On CUDA, LibTorch's fused kernel: one pass over x instead of eight, and
/// backward keeps x and the fp32 rstd, as Replayed does. It multiplies the
/// weight in fp32 before the cast, a rounding away from HF's order. Should
/// a build lack it, the ops (with a note, once).
at::Tensor rmsNorm(const at::Tensor &x, const at::Tensor &w, double eps) {
  static std::atomic<bool> noFused{false};
  if (x.is_cuda() && !noFused.load()) {
    try {
      return std::get<0>(at::_fused_rms_norm(x, {x.size(-1)}, w, eps));
    } catch (const c10::Error &e) {
      if (!noFused.exchange(true))
        std::fprintf(stderr,
                     "note: fused RMSNorm unavailable (%s); using separate "
                     "ops\n",
                     e.what_without_backtrace());
    }
  }
  return needsGrad(x, w) ? Replayed<RmsNormOps>::apply(x, w, eps)
                         : rmsNormOps(x, w, eps);
}

/// On CUDA one kernel each way (FusedOps.h); elsewhere LibTorch's ops.
at::Tensor swiGlu(const at::Tensor &gate, const at::Tensor &up) {
  if (fused::enabled(gate))
    if (at::Tensor y = fused::swiGlu(gate, up); y.defined())
      return y;
  return needsGrad(gate, up) ? Replayed<SwiGluOps>::apply(gate, up, 0.0)
                             : SwiGluOps::run(gate, up, 0.0);
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

/// q and k rotated: on CUDA in one kernel (one backward kernel too).
std::pair<at::Tensor, at::Tensor> rotary(const at::Tensor &q,
                                         const at::Tensor &k,
                                         const at::Tensor &cos,
                                         const at::Tensor &sinRot) {
  if (fused::enabled(q))
    if (auto r = fused::rotary(q, k, cos, sinRot); r.first.defined())
      return r;
  return {fused::rotaryOps(q, cos, sinRot), fused::rotaryOps(k, cos, sinRot)};
}

/// `ws` as one tensor of their stacked rows when they lie back to back in
/// one block (a shard's q, k, v and gate, up do: flatShard keeps
/// llamaParams' order) and no gradient is wanted: one GEMM reads them all
/// where three or two did. Undefined otherwise; under autograd the leaves
/// must stay separate to get their gradients.
at::Tensor stackedRows(std::initializer_list<at::Tensor> ws) {
  if (at::GradMode::is_enabled())
    return {};
  const at::Tensor &first = *ws.begin();
  int64_t rows = 0, next = first.storage_offset();
  for (const at::Tensor &w : ws) {
    if (!w.defined() || w.dim() != first.dim() || !w.is_contiguous() ||
        w.scalar_type() != first.scalar_type() ||
        !w.storage().is_alias_of(first.storage()) ||
        w.storage_offset() != next ||
        (w.dim() == 2 && w.size(1) != first.size(1)))
      return {};
    next += w.numel();
    rows += w.size(0);
  }
  std::vector<int64_t> shape = first.sizes().vec();
  shape[0] = rows;
  return at::empty({0}, first.options())
      .set_(first.storage(), first.storage_offset(), shape);
}

} // namespace

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
  const int64_t headDim = m.hidden / m.heads;
  const int64_t heads = m.heads / tp.size, kvHeads = m.kvHeads / tp.size;

  // Whole sequences under tp shard their tokens between the layers'
  // collectives (TensorParallel::shardSequence): x holds 1/tp of the
  // pass's rows [B S / tp, h], and the rotary tables give B and S.
  const bool seq = shardsPass(cache, mask);
  // Backward gathers a shard again rather than keep it whole, except in a
  // recomputed layer's replay (the only grad-mode call under recompute),
  // which is freed right after.
  const bool regather = seq && at::GradMode::is_enabled() && !recompute;
  const int64_t B = seq ? cos.size(0) : x.size(0),
                S = seq ? cos.size(2) : x.size(1);
  auto colIn = [&](const at::Tensor &v) {
    if (seq)
      return parallel::gatherSeq(v, tp.comm);
    return tp.size > 1 ? parallel::copyToGroup(v, tp.comm) : v;
  };
  auto rowOut = [&](const at::Tensor &v) {
    if (seq)
      return parallel::scatterSeq(v, tp.comm);
    return tp.size > 1 ? parallel::reduceFromGroup(v, tp.comm) : v;
  };
  // A norm's weight sees only this rank's tokens: its gradient is
  // summed over tp, so every rank's backward still gives the whole one.
  auto norm = [&](const at::Tensor &v, const char *name) {
    const at::Tensor &w = p(pre + name);
    return rmsNorm(
        v, seq && w.requires_grad() ? parallel::copyToGroup(w, tp.comm) : w,
        cfg.normEps);
  };

  at::Tensor xn = norm(x, "input_layernorm.weight");
  const std::string a = pre + "self_attn.";
  auto bias = [&](const char *name) {
    return m.qkvBias ? p(a + name + ".bias") : at::Tensor();
  };
  auto heads4 = [&](const at::Tensor &y, int64_t n) {
    return y.view({B, S, n, headDim}).transpose(1, 2);
  };
  at::Tensor q, k, v;
  if (regather) {
    std::vector<at::Tensor> y = parallel::gatheredLinears(
        xn,
        {p(a + "q_proj.weight"), p(a + "k_proj.weight"),
         p(a + "v_proj.weight")},
        {bias("q_proj"), bias("k_proj"), bias("v_proj")}, tp.comm);
    q = heads4(y[0], heads);
    k = heads4(y[1], kvHeads);
    v = heads4(y[2], kvHeads);
  } else {
    at::Tensor h = colIn(xn);
    // Column-parallel projections: a bias is sharded as its rows are.
    auto project = [&](const char *name, int64_t n) {
      const std::string w = a + name;
      return heads4(m.qkvBias ? at::linear(h, p(w + ".weight"), p(w + ".bias"))
                              : at::linear(h, p(w + ".weight")),
                    n);
    };
    at::Tensor wqkv =
        stackedRows({p(a + "q_proj.weight"), p(a + "k_proj.weight"),
                     p(a + "v_proj.weight")});
    at::Tensor bqkv =
        m.qkvBias && wqkv.defined()
            ? stackedRows({p(a + "q_proj.bias"), p(a + "k_proj.bias"),
                           p(a + "v_proj.bias")})
            : at::Tensor();
    if (wqkv.defined() && (!m.qkvBias || bqkv.defined())) {
      at::Tensor y =
          m.qkvBias ? at::linear(h, wqkv, bqkv) : at::linear(h, wqkv);
      auto part = [&](int64_t first, int64_t n) {
        return heads4(y.narrow(-1, first * headDim, n * headDim), n);
      };
      q = part(0, heads);
      k = part(heads, kvHeads);
      v = part(heads + kvHeads, kvHeads);
    } else {
      q = project("q_proj", heads);
      k = project("k_proj", kvHeads);
      v = project("v_proj", kvHeads);
    }
  }
  const int64_t t0 = cache ? cache->length : 0;
  if (cache) {
    if (int(cache->keys.size()) <= l) {
      cache->keys.resize(l + 1);
      cache->values.resize(l + 1);
    }
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
  }
  // A fixed-shape decode step writes its slot of the cache in the rotary
  // kernel itself where the fused kernels serve.
  at::Tensor folded;
  if (cache && cache->slot.defined() && fused::enabled(q))
    folded = fused::rotaryIntoCache(q, k, v, cos, sin, cache->keys[l],
                                    cache->values[l], cache->slot);
  if (folded.defined())
    q = folded;
  else
    std::tie(q, k) = rotary(q, k, cos, sin);
  if (cache) {
    if (cache->slot.defined()) {
      if (!folded.defined()) {
        cache->keys[l].index_copy_(2, cache->slot, k);
        cache->values[l].index_copy_(2, cache->slot, v);
      }
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
    // Grouped KV heads read without copies where a kernel allows.
    attn = attention(q, k, v, mask);
  }
  attn = attn.transpose(1, 2); // [B, positions, heads here, D]
  if (sp.ulysses)
    attn = parallel::headsToSeq(attn, sp.ulysses);
  attn = attn.reshape({B, S, heads * headDim});
  // Row-parallel projections added to the residual stream. Without tp the
  // add rides in the GEMM's epilogue (addmm, beta 1): one kernel where two
  // ran, and one rounding of the sum.
  auto addProjected = [&](const at::Tensor &res, const at::Tensor &in,
                          const at::Tensor &w) {
    if (tp.size > 1)
      return res + rowOut(at::linear(in, w));
    return at::addmm(res.reshape({-1, res.size(-1)}),
                     in.reshape({-1, in.size(-1)}), w.t())
        .view(res.sizes());
  };
  at::Tensor x2 = addProjected(x, attn, p(pre + "self_attn.o_proj.weight"));

  at::Tensor xn2 = norm(x2, "post_attention_layernorm.weight");
  const at::Tensor &wGate = p(pre + "mlp.gate_proj.weight"),
                   &wUp = p(pre + "mlp.up_proj.weight");
  at::Tensor gate, up;
  if (regather) {
    std::vector<at::Tensor> y =
        parallel::gatheredLinears(xn2, {wGate, wUp}, {}, tp.comm);
    gate = y[0];
    up = y[1];
  } else if (at::Tensor h2 = colIn(xn2), wgu = stackedRows({wGate, wUp});
             wgu.defined()) {
    at::Tensor y = at::linear(h2, wgu);
    gate = y.narrow(-1, 0, wGate.size(0));
    up = y.narrow(-1, wGate.size(0), wGate.size(0));
  } else {
    gate = at::linear(h2, wGate);
    up = at::linear(h2, wUp);
  }
  return addProjected(x2, swiGlu(gate, up), p(pre + "mlp.down_proj.weight"));
}

at::Tensor LlamaModel::hidden(const at::Tensor &tokens,
                              const at::Tensor &positions,
                              const at::Tensor &mask, KvCache *cache) {
  return layers(embed(tokens, shardsPass(cache, mask)), positions, mask, cache,
                /*finalNorm=*/true);
}

bool LlamaModel::shardsSequence() const {
  return tp.size > 1 && tp.shardSequence;
}

bool LlamaModel::shardsPass(const KvCache *cache,
                            const at::Tensor &mask) const {
  return shardsSequence() && !cache && !mask.defined();
}

int64_t LlamaModel::paddedLength(int64_t S) const {
  const int64_t k = shardsSequence() ? tp.size : 1;
  return (S + k - 1) / k * k;
}

at::Tensor LlamaModel::padForShards(const at::Tensor &t) const {
  const int64_t S = t.size(1), padded = paddedLength(S);
  return padded != S ? at::constant_pad_nd(t, {0, padded - S}) : t;
}

at::Tensor LlamaModel::embed(const at::Tensor &tokens, bool shard) {
  // Vocab-parallel embedding: each rank looks up its rows, the rest are 0.
  const at::Tensor &emb = p("model.embed_tokens.weight");
  int64_t rows = emb.size(0), lo = tp.rank * rows;
  at::Tensor local = tokens - lo;
  at::Tensor inRange = (local >= 0) & (local < rows);
  at::Tensor x = at::embedding(emb, local.clamp(0, rows - 1)) *
                 inRange.unsqueeze(-1).to(emb.scalar_type());
  if (shard)
    return parallel::scatterSeq(x, tp.comm);
  return tp.size > 1 ? parallel::reduceFromGroup(x, tp.comm) : x;
}

at::Tensor LlamaModel::layers(at::Tensor x, const at::Tensor &positions,
                              const at::Tensor &mask, KvCache *cache,
                              bool finalNorm) {
  const ModelShape &m = cfg.shape;
  // Rotary tables for these positions: [B, 1, S, headDim].
  const int64_t headDim = m.hidden / m.heads;
  // Made once per device: a host-to-device copy here would sync, which
  // no CUDA graph capture of a decode step survives (prefill comes first).
  if (!ropeInv.defined() || ropeInv.device() != device_)
    ropeInv = ropeFrequencies(cfg, headDim).to(device_);
  at::Tensor freqs =
      positions.to(at::kFloat).unsqueeze(-1) * ropeInv; // [B,S,hd/2]
  at::Tensor c = freqs.cos(), s = freqs.sin();
  // sin with rotate_half's sign folded in (rotary).
  at::Tensor cos = at::cat({c, c}, -1).unsqueeze(1).to(dtype_),
             sin = at::cat({-s, s}, -1).unsqueeze(1).to(dtype_);
  // Replay only whole sequences (no cache, causal mask): training.
  const bool replay =
      recompute && !cache && !mask.defined() && at::GradMode::is_enabled();
  for (int l = layerBegin; l < layerEnd; ++l)
    x = replay ? RecomputedLayer::apply(x, cos, sin,
                                        reinterpret_cast<int64_t>(this), l)
               : layer(l, x, cos, sin, mask, cache);
  if (cache && !cache->slot.defined()) // every layer wrote these positions
    cache->length += x.size(1);
  if (!finalNorm)
    return x;
  // The whole sequence again for the head, every tp rank alike; the final
  // norm and the head run replicated, so the gradient needs no sum here.
  if (shardsPass(cache, mask))
    x = parallel::gatherDim(x, tp.comm, 0)
            .view({positions.size(0), positions.size(1), x.size(-1)});
  return rmsNorm(x, p("model.norm.weight"), cfg.normEps);
}

at::Tensor LlamaModel::head(const at::Tensor &x) {
  // Logits and values leave in fp32: log-softmax and losses need it.
  if (cfg.shape.valueHead)
    return at::linear(x, p("value_head.weight")).squeeze(-1).to(at::kFloat);
  at::Tensor logits = logitsShard(x);
  return tp.size > 1 ? parallel::gatherDim(logits, tp.comm, -1) : logits;
}

const at::Tensor &LlamaModel::headWeight() const {
  return cfg.shape.tieEmbeddings ? p("model.embed_tokens.weight")
                                 : p("lm_head.weight");
}

at::Tensor LlamaModel::logitsShard(const at::Tensor &x) {
  return at::linear(tp.size > 1 ? parallel::copyToGroup(x, tp.comm) : x,
                    headWeight())
      .to(at::kFloat);
}
