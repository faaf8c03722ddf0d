//===- ModelGenerate.cpp - sampling with a KV cache -----------------------===//
//
// LlamaModel::generate: prompts left-padded into one batch, a prefill, then
// one decode step per new token over a preallocated KV cache (replayed as
// CUDA graphs where StepGraphs allows), sampling by inverse CDF from
// uniforms drawn on the host so that every device samples alike.
//
//===----------------------------------------------------------------------===//

#include "Sampling.h"
#include "StepGraphs.h"
#include "rlhf/runtime/Model.h"

#include "rlhf/runtime/Error.h"

#include <torch/torch.h>

#include <limits>

using namespace rlhf;

namespace {
constexpr float kMasked = -std::numeric_limits<float>::infinity();
} // namespace

Generation
LlamaModel::generate(const std::vector<std::vector<int64_t>> &prompts,
                     const GenerateOptions &o) {
  at::NoGradGuard noGrad;
  if (cfg.shape.valueHead)
    throw Error("cannot generate with a value-head model");
  if (sp.size > 1)
    throw Error("generation runs with sp = 1; the planner must give generate "
                "calls sp = 1 (this model has sp = " +
                std::to_string(sp.size) + ")");
  const int64_t B = int64_t(prompts.size());
  int64_t P = 0;
  for (const auto &pr : prompts) {
    if (pr.empty())
      throw Error("cannot generate from an empty prompt");
    P = std::max<int64_t>(P, int64_t(pr.size()));
  }
  const int64_t G = o.maxNewTokens, T = P + G;
  if (T > cfg.maxSeq)
    throw Error("prompt of " + std::to_string(P) + " tokens plus " +
                std::to_string(G) + " new tokens exceeds max_seq " +
                std::to_string(cfg.maxSeq));
  // Left-pad so every row's last prompt token is at P-1.
  // Built on the host, then moved in one copy each.
  at::Tensor seq = at::full({B, T}, o.padToken, at::kLong);
  at::Tensor real = at::zeros({B, T}, at::kLong);
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = int64_t(prompts[b].size());
    auto *row = seq[b].data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i)
      row[P - n + i] = prompts[b][i];
    real.narrow(0, b, 1).narrow(1, P - n, n).fill_(1);
  }
  seq = seq.to(device_);
  real = real.to(device_);
  // Positions count real tokens; pads attend nowhere and are never attended.
  auto positionsOf = [&](int64_t upto) {
    return (real.narrow(1, 0, upto).cumsum(1) - 1).clamp_min(0);
  };
  auto maskOf = [&](int64_t q0, int64_t q1) {
    at::Tensor keys = real.narrow(1, 0, q1).to(at::kBool); // [B, q1]
    at::Tensor causal = at::ones({q1 - q0, q1}, on(at::kBool)).tril(q0);
    at::Tensor allowed = causal.unsqueeze(0) & keys.unsqueeze(1); // [B, q, k]
    // A left-pad query row would attend to nothing; let it see itself.
    at::Tensor self =
        at::eye(q1, on(at::kBool)).narrow(0, q0, q1 - q0).unsqueeze(0);
    allowed = allowed | self;
    // In the compute dtype: attention would convert an fp32 mask in every
    // layer, and prefill holds [B, P, P] of it (priced by the cost model).
    return at::where(allowed, at::zeros({}, on(dtype_)),
                     at::full({}, kMasked, on(dtype_)))
        .unsqueeze(1);
  };

  at::Tensor logprobs = at::zeros({B, G}, on(at::kFloat));
  at::Tensor done = at::zeros({B}, on(at::kBool));
  if (!o.rowSeeds.empty() && int64_t(o.rowSeeds.size()) != B)
    throw Error("generate: " + std::to_string(o.rowSeeds.size()) +
                " row seeds for " + std::to_string(B) + " prompts");
  // Every step's uniform draws [G, B], made up front on the host (the same
  // numbers on every device) and moved once: sampling then runs on the
  // device by inverse CDF, with no copy per step.
  at::Tensor uniforms;
  if (!o.greedy) {
    if (o.rowSeeds.empty()) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
      uniforms = at::rand({G, B}, gen, at::kDouble);
    } else {
      uniforms = at::empty({G, B}, at::kDouble);
      for (int64_t b = 0; b < B; ++b) {
        auto g =
            at::make_generator<at::CPUGeneratorImpl>(o.rowSeeds[size_t(b)]);
        uniforms.select(1, b).copy_(at::rand({G}, g, at::kDouble));
      }
    }
    uniforms = uniforms.to(device_);
  }
  KvCache cache;
  cache.capacity = T;
  // Logits at the last position, on the last stage (undefined on others).
  // With pipeline stages, the stages run one after another on the whole
  // batch: the first embeds, each later one receives its predecessor's
  // hidden states, and each keeps the KV cache of its own layers.
  auto lastLogits = [&](const at::Tensor &tokens, const at::Tensor &positions,
                        const at::Tensor &mask) {
    const int64_t S = tokens.size(1);
    at::Tensor x;
    if (firstStage()) {
      x = embed(tokens);
    } else {
      x = at::empty({B, S, cfg.shape.hidden}, on(dtype_));
      pp.comm->recv(x, pp.stage - 1);
    }
    x = layers(x, positions, mask, &cache, /*finalNorm=*/lastStage());
    if (!lastStage()) {
      pp.comm->send(x, pp.stage + 1);
      return at::Tensor();
    }
    // The last position as [B, h] rows: a [B, 1, h] slice of the prompt is
    // not contiguous, so at::linear could not fold it into one GEMM and would
    // run a bmm over the weight expanded per row, which oneDNN's bf16 path
    // copies whole (B x the lm head: 0.5 GiB at batch 64 of LLaMA's
    // vocabulary at width 128).
    return head(x.select(1, S - 1)); // [B, V]
  };
  // The next token of every row and its log-probability, from the logits at
  // the last position and this step's uniforms `u` [B] (unused if greedy).
  auto sample = [&](const at::Tensor &last, const at::Tensor &u) {
    return sampleTokens(last, u, o);
  };
  auto uniformsAt = [&](int64_t step) {
    return o.greedy ? at::Tensor() : uniforms.select(0, step);
  };
  // Writes a step's samples; true once every row has finished. Asking the
  // device is a sync, so only every few steps.
  auto record = [&](int64_t step, at::Tensor next, const at::Tensor &lp) {
    next = at::where(done, at::full({}, o.padToken, on(at::kLong)), next);
    seq.narrow(1, P + step, 1).copy_(next.unsqueeze(1));
    real.narrow(1, P + step, 1).copy_((~done).to(at::kLong).unsqueeze(1));
    logprobs.narrow(1, step, 1)
        .copy_(at::where(done, at::zeros({}, on(at::kFloat)), lp).unsqueeze(1));
    if (o.eosToken < 0)
      return false;
    done = done | (next == o.eosToken);
    return (step % 8 == 7) && done.all().item<bool>();
  };
  if (G == 0)
    return {seq, logprobs, real, P};
  at::Tensor last =
      lastLogits(seq.narrow(1, 0, P), positionsOf(P), maskOf(0, P));
  if (pp.stages == 1) {
    // Steps of fixed shape, replayable as CUDA graphs: static input and
    // output buffers, the cache slot as a device tensor, and attention over
    // a window of whole 128-position blocks under a key mask (one graph per
    // window; at most 127 masked positions of extra reads).
    constexpr int64_t kWindowBlock = 128;
    at::Tensor keyMask = at::full({B, T}, kMasked, on(at::kFloat));
    keyMask.narrow(1, 0, P).masked_fill_(real.narrow(1, 0, P).to(at::kBool),
                                         0.0);
    at::Tensor tok = at::empty({B, 1}, on(at::kLong));
    at::Tensor pos = positionsOf(P).narrow(1, P - 1, 1).clone();
    at::Tensor slot = at::empty({1}, on(at::kLong));
    at::Tensor u = o.greedy ? at::Tensor() : at::empty({B}, on(at::kDouble));
    at::Tensor nextOut = at::empty({B}, on(at::kLong));
    at::Tensor lpOut = at::empty({B}, on(at::kFloat));
    // Under tp, only collectives that are kernels (NCCL) can be captured.
    const bool sharded = tp.size > 1;
    StepGraphs graphs(
        device_, o.cudaGraphs && (!sharded || tp.comm->capturable()),
        sharded ? agreeOver(*tp.comm, device_) : std::function<bool(bool)>());
    auto [next0, lp0] = sample(last, uniformsAt(0));
    last = at::Tensor(); // [B, V] fp32: not to be held beside every step's
    bool finished = record(0, next0, lp0);
    for (int64_t step = 1; step < G && !finished; ++step) {
      const int64_t t = P + step - 1; // the token this step reads
      tok.copy_(seq.narrow(1, t, 1));
      pos.add_(real.narrow(1, t, 1));
      slot.fill_(t);
      keyMask.narrow(1, t, 1).fill_(0.0); // a token attends to itself
      if (u.defined())
        u.copy_(uniforms.select(0, step));
      const int64_t window =
          std::min(T, (t + kWindowBlock) / kWindowBlock * kWindowBlock);
      graphs.run(window, [&] {
        cache.slot = slot;
        cache.window = window;
        at::Tensor mask = keyMask.narrow(1, 0, window)
                              .unsqueeze(1)
                              .unsqueeze(1)
                              .to(dtype_); // [B, 1, 1, window]
        at::Tensor x = layers(embed(tok), pos, mask, &cache, true);
        auto [n, l] = sample(head(x).squeeze(1), u);
        nextOut.copy_(n);
        lpOut.copy_(l);
      });
      if (sharded && graphs.active())
        tp.comm->watchQueued("decode step"); // the replay's all-reduces
      finished = record(step, nextOut, lpOut);
    }
    return {seq, logprobs, real, P};
  }
  for (int64_t step = 0; step < G; ++step) {
    at::Tensor next, lp;
    if (lastStage())
      std::tie(next, lp) = sample(last, uniformsAt(step));
    last = at::Tensor(); // freed before the next step's logits
    if (pp.stages > 1) { // the last stage's samples, on every stage
      at::Tensor both =
          lastStage() ? at::stack({next.to(at::kDouble), lp.to(at::kDouble)})
                      : at::empty({2, B}, on(at::kDouble));
      pp.comm->broadcast(both, pp.stages - 1);
      next = both[0].to(at::kLong);
      lp = both[1].to(at::kFloat);
    }
    if (record(step, next, lp) || step + 1 == G)
      break;
    int64_t t = P + step;
    at::Tensor pos = positionsOf(t + 1).narrow(1, t, 1);
    last = lastLogits(seq.narrow(1, t, 1), pos, maskOf(t, t + 1));
  }
  return {seq, logprobs, real, P};
}
