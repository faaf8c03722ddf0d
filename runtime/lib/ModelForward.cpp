//===- ModelForward.cpp - whole forward passes and their outputs ----------===//
//
// LlamaModel's forward passes over whole sequences: the logits or values
// (gathered in sequence order under sp), the per-token statistics losses
// and inference read (vocabulary-parallel under tp), and the pipeline's
// per-stage passes. The layers themselves are in Model.cpp.
//
//===----------------------------------------------------------------------===//

#include "HeadStats.h"
#include "ParallelOps.h"
#include "RingAttention.h"
#include "rlhf/runtime/Model.h"

#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/SeqSplit.h"

#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <numeric>

using namespace rlhf;

namespace {

void checkLength(const ModelConfig &cfg, int64_t S) {
  if (S > cfg.maxSeq)
    throw Error("sequence of " + std::to_string(S) +
                " tokens exceeds max_seq " + std::to_string(cfg.maxSeq));
}

/// Where sp puts a sequence of S positions. Ring ranks hold the zigzag
/// layout's spans (balanced causal ring attention; one span with ring 1) and
/// the ulysses ranks of a ring rank split its spans' positions in order, so
/// the Ulysses all-to-all hands each ring rank exactly its spans. The
/// sequence is padded at its end to a length every split divides
/// (spPaddedLength).
struct SpSplit {
  int64_t length;                   ///< S with the padding
  parallel::RingLayout ring;        ///< the positions of each ring rank
  std::vector<parallel::Span> mine; ///< this sp rank's, in order

  SpSplit(const SequenceParallel &sp, int64_t S, int64_t tpShards) {
    length = spPaddedLength(S, sp.size, sp.ringSize, tpShards);
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
    const SpSplit split(sp, S, shardsSequence() ? tp.size : 1);
    at::Tensor x = hidden(split.local(tokens), split.local(positions),
                          /*mask: causal=*/at::Tensor(), nullptr);
    return split.inOrder(parallel::gatherDim(head(x), sp.comm, 1), S);
  }
  return head(wholeHidden(tokens, positions));
}

at::Tensor LlamaModel::wholeHidden(const at::Tensor &tokens,
                                   const at::Tensor &positions) {
  at::Tensor x = hidden(padForShards(tokens), padForShards(positions),
                        /*mask: causal=*/at::Tensor(), nullptr);
  return x.size(1) == tokens.size(1) ? x : x.narrow(1, 0, tokens.size(1));
}

namespace {

/// The token after each position of `tokens` [B, S]; the last position has
/// none (a placeholder id, its column dropped by the caller).
at::Tensor nextTokens(const at::Tensor &tokens) {
  return at::cat({tokens.narrow(1, 1, tokens.size(1) - 1),
                  at::zeros({tokens.size(0), 1}, tokens.options())},
                 1);
}

TokenStats each(TokenStats r, const std::function<at::Tensor(at::Tensor)> &f) {
  for (at::Tensor *t : {&r.logprobs, &r.entropy})
    if (t->defined())
      *t = f(*t);
  return r;
}

/// Drops the last position's column, which has no next token.
TokenStats dropLast(TokenStats r) {
  return each(std::move(r),
              [](at::Tensor t) { return t.narrow(1, 0, t.size(1) - 1); });
}

} // namespace

TokenStats LlamaModel::fusedStats(const at::Tensor &x, const at::Tensor &next,
                                  bool logprobs, bool entropy,
                                  bool entropyGrad) {
  // The head and its statistics run fused over chunks of positions
  // (HeadStats.h): no [B, S, V] logits, with gradients or without, and
  // under tp no rank holds more than a chunk of its vocabulary shard.
  if (!logprobs && !entropy)
    return TokenStats{};
  const bool sharded = tp.size > 1;
  at::Tensor flat = x.reshape({-1, x.size(2)});
  at::Tensor s = fusedHeadStats(
      sharded ? parallel::copyToGroup(flat, tp.comm) : flat, headWeight(),
      next.reshape({-1}), logprobs, entropy, sharded ? tp.comm : nullptr,
      tp.rank * (cfg.shape.vocab / tp.size), /*chunkBytes=*/0, invTemperature,
      entropyGrad);
  TokenStats r;
  int64_t col = 0;
  if (logprobs)
    r.logprobs = s.select(1, col++).view({x.size(0), x.size(1)});
  if (entropy)
    r.entropy = s.select(1, col).view({x.size(0), x.size(1)});
  return r;
}

TokenStats LlamaModel::headStats(const at::Tensor &hidden,
                                 const at::Tensor &tokens, bool logprobs,
                                 bool entropy, bool entropyGrad) {
  return dropLast(fusedStats(hidden, nextTokens(tokens.to(device_)), logprobs,
                             entropy, entropyGrad));
}

TokenStats LlamaModel::tokenStats(const at::Tensor &tokensIn, bool logprobs,
                                  bool entropy, bool entropyGrad) {
  const at::Tensor tokens = tokensIn.to(device_);
  const int64_t B = tokens.size(0), S = tokens.size(1);
  checkLength(cfg, S);
  if (cfg.shape.valueHead) {
    // A value head's "distribution", from its whole output.
    at::Tensor lp = at::log_softmax(forward(tokens), -1);
    TokenStats r;
    if (logprobs)
      r.logprobs = lp.gather(-1, nextTokens(tokens).unsqueeze(-1)).squeeze(-1);
    if (entropy)
      r.entropy = -(lp.exp() * lp).sum(-1);
    if (entropy && !entropyGrad)
      r.entropy = r.entropy.detach();
    return dropLast(r);
  }
  // Every stage runs its layers; the last one the fused head.
  if (pp.stages > 1) {
    StageActivations a = stageForward(tokens, /*head=*/false);
    return lastStage()
               ? headStats(a.output, tokens, logprobs, entropy, entropyGrad)
               : TokenStats{};
  }
  at::Tensor positions =
      at::arange(S, on(at::kLong)).unsqueeze(0).expand({B, S});
  if (sp.size <= 1)
    return headStats(wholeHidden(tokens, positions), tokens, logprobs, entropy,
                     entropyGrad);
  // Under sp each rank computes its positions' columns; only those are
  // gathered.
  const SpSplit split(sp, S, shardsSequence() ? tp.size : 1);
  at::Tensor x = hidden(split.local(tokens), split.local(positions),
                        /*mask: causal=*/at::Tensor(), nullptr);
  return each(fusedStats(x, split.local(nextTokens(tokens)), logprobs, entropy,
                         entropyGrad),
              [&](at::Tensor t) {
                return split.inOrder(parallel::gatherDim(t, sp.comm, 1), S - 1);
              });
}

at::Tensor LlamaModel::tokenStat(const at::Tensor &tokens, bool entropy) {
  TokenStats r = tokenStats(tokens, !entropy, entropy);
  return entropy ? r.entropy : r.logprobs;
}

at::Tensor LlamaModel::stageInputFor(const at::Tensor &tokens) {
  if (firstStage())
    return at::Tensor();
  // Under tp the stages pass on blocks of the padded pass's token rows
  // (shardsSequence).
  const int64_t B = tokens.size(0), S = paddedLength(tokens.size(1));
  return shardsSequence()
             ? at::empty({B * S / tp.size, cfg.shape.hidden}, on(dtype_))
             : at::empty({B, S, cfg.shape.hidden}, on(dtype_));
}

StageActivations LlamaModel::stageRun(const at::Tensor &tokensIn,
                                      at::Tensor input, bool withHead) {
  const at::Tensor tokens = padForShards(tokensIn.to(device_));
  const int64_t B = tokens.size(0), S = tokens.size(1), real = tokensIn.size(1);
  at::Tensor positions =
      at::arange(S, on(at::kLong)).unsqueeze(0).expand({B, S});
  const at::Tensor mask; // causal
  StageActivations a;
  at::Tensor x;
  if (firstStage()) {
    x = embed(tokens, shardsSequence());
  } else {
    a.input = input;
    a.input.set_requires_grad(at::GradMode::is_enabled());
    x = a.input;
  }
  x = layers(x, positions, mask, nullptr, /*finalNorm=*/lastStage());
  if (lastStage() && real != S)
    x = x.narrow(1, 0, real);
  a.output = lastStage() && withHead ? head(x) : x;
  return a;
}

at::Tensor LlamaModel::stageGrad(const StageActivations &a,
                                 const at::Tensor &gradOutput) {
  if (!lastStage())
    a.output.backward(gradOutput);
  if (firstStage())
    return at::Tensor();
  at::Tensor g = a.input.grad();
  return g.defined() ? g : at::zeros_like(a.input);
}

StageActivations LlamaModel::stageForward(const at::Tensor &tokens,
                                          bool withHead) {
  at::Tensor input = stageInputFor(tokens);
  if (input.defined())
    pp.comm->recv(input, pp.stage - 1);
  StageActivations a = stageRun(tokens, input, withHead);
  if (!lastStage())
    pp.comm->send(a.output.detach(), pp.stage + 1);
  return a;
}

void LlamaModel::stageBackward(const StageActivations &a) {
  at::Tensor grad;
  if (!lastStage()) {
    grad = at::empty_like(a.output);
    pp.comm->recv(grad, pp.stage + 1);
  }
  at::Tensor g = stageGrad(a, grad);
  if (!firstStage())
    pp.comm->send(g, pp.stage - 1);
}
