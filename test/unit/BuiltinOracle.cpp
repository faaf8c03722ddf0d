//===- BuiltinOracle.cpp - the C++ estimators and losses, as oracles ------===//

#include "BuiltinOracle.h"

#include "rlhf/runtime/Error.h"

#include <torch/torch.h>

#include <cmath>

using namespace rlhf;
using namespace rlhf::oracle;

GaeResult oracle::gae(const at::Tensor &score, const at::Tensor &values,
                      const at::Tensor &logprobs, const at::Tensor &refLogprobs,
                      const at::Tensor &mask, double gamma, double lam,
                      double kl) {
  at::NoGradGuard ng;
  const int64_t N = mask.size(0), T = mask.size(1);
  at::Tensor m = mask.to(at::kFloat);
  at::Tensor reward = -kl * (logprobs - refLogprobs) * m;
  at::Tensor idx = at::arange(T, at::kLong).unsqueeze(0).expand({N, T});
  at::Tensor last = (idx * mask.to(at::kLong)).argmax(1);
  reward.scatter_add_(1, last.unsqueeze(1), score.to(at::kFloat).unsqueeze(1));
  at::Tensor v = values * m;
  at::Tensor adv = at::zeros({N, T});
  at::Tensor running = at::zeros({N});
  // verl's compute_gae_advantage_return: a masked-out position (an
  // observation inside a response) passes the next value and advantage on.
  at::Tensor next = at::zeros({N});
  for (int64_t t = T - 1; t >= 0; --t) {
    at::Tensor mt = m.select(1, t);
    at::Tensor delta = reward.select(1, t) + gamma * next - v.select(1, t);
    running = (delta + gamma * lam * running) * mt + running * (1 - mt);
    adv.select(1, t).copy_(running * mt);
    next = v.select(1, t) * mt + next * (1 - mt);
  }
  at::Tensor returns = (adv + v) * m;
  double count = std::max(1.0, m.sum().item<double>());
  double mean = (adv * m).sum().item<double>() / count;
  double var = (((adv - mean) * m).pow(2)).sum().item<double>() / count;
  return {(adv - mean) / std::sqrt(var + 1e-8) * m, returns};
}

namespace {
at::Tensor grouped(const at::Tensor &score, int64_t group) {
  if (group < 1 || score.size(0) % group)
    throw Error("batch of " + std::to_string(score.size(0)) +
                " scores does not split into groups of " +
                std::to_string(group));
  return score.to(at::kFloat).view({-1, group});
}
} // namespace

at::Tensor oracle::grpoAdvantages(const at::Tensor &score, int64_t group) {
  at::Tensor g = grouped(score, group);
  at::Tensor mean = g.mean(1, true);
  at::Tensor std =
      group > 1 ? g.std(1, /*unbiased=*/true, true) : at::zeros_like(mean);
  return ((g - mean) / (std + 1e-6)).view({-1});
}

at::Tensor oracle::rlooAdvantages(const at::Tensor &score, int64_t group) {
  if (group < 2)
    throw Error("RLOO needs at least 2 samples per prompt");
  at::Tensor g = grouped(score, group);
  return (g - (g.sum(1, true) - g) / double(group - 1)).view({-1});
}

at::Tensor oracle::remaxAdvantages(const at::Tensor &score,
                                   const at::Tensor &baseline) {
  return score.to(at::kFloat) - baseline.to(at::kFloat);
}

at::Tensor oracle::klPenalty(const at::Tensor &score,
                             const at::Tensor &logprobs,
                             const at::Tensor &refLogprobs,
                             const at::Tensor &mask, double coef) {
  return score.to(at::kFloat) -
         coef * ((logprobs - refLogprobs) * mask.to(at::kFloat)).sum(1);
}

Batch Batch::rows(int64_t lo, int64_t n) const {
  Batch r = *this;
  for (at::Tensor *t :
       {&r.seq, &r.lossMask, &r.oldLogprobs, &r.refLogprobs, &r.advantages,
        &r.oldValues, &r.returns, &r.rejected, &r.rejectedMask, &r.refRejected})
    if (t->defined())
      *t = t->narrow(0, lo, n);
  return r;
}

at::Tensor oracle::loss(LlamaModel &model, Loss k, const Batch &b,
                        const LossSettings &ls) {
  auto tokenMean = [&](const at::Tensor &x) {
    return (x * b.lossMask).sum() /
           std::max(1.0, b.lossMask.sum().item<double>());
  };
  switch (k) {
  case Loss::Sft:
    return tokenMean(-tokenLogprobs(model.forward(b.seq), b.seq));
  case Loss::PpoActor:
  case Loss::Grpo: {
    at::Tensor lp = tokenLogprobs(model.forward(b.seq), b.seq);
    at::Tensor adv = b.advantages.dim() == 1
                         ? b.advantages.unsqueeze(1).expand_as(lp)
                         : b.advantages;
    at::Tensor ratio = (lp - b.oldLogprobs).exp();
    at::Tensor l =
        -at::min(ratio * adv, ratio.clamp(1 - ls.clip, 1 + ls.clip) * adv);
    if (k == Loss::Grpo && ls.kl > 0) {
      at::Tensor d = b.refLogprobs - lp; // k3: exp(d) - d - 1 >= 0
      l = l + ls.kl * (d.exp() - d - 1);
    }
    return tokenMean(l);
  }
  case Loss::PpoValue: {
    at::Tensor v = model.forward(b.seq).narrow(1, 0, b.seq.size(1) - 1);
    at::Tensor vc = b.oldValues + (v - b.oldValues).clamp(-ls.clip, ls.clip);
    return tokenMean(0.5 *
                     at::max((v - b.returns).pow(2), (vc - b.returns).pow(2)));
  }
  case Loss::Dpo: {
    auto seqLp = [&](const at::Tensor &seq, const at::Tensor &mask) {
      return (tokenLogprobs(model.forward(seq), seq) * mask).sum(1);
    };
    at::Tensor lpc = seqLp(b.seq, b.lossMask);
    at::Tensor lpr = seqLp(b.rejected, b.rejectedMask);
    at::Tensor rc = (b.refLogprobs * b.lossMask).sum(1);
    at::Tensor rr = (b.refRejected * b.rejectedMask).sum(1);
    return (-at::log_sigmoid(ls.beta * ((lpc - rc) - (lpr - rr)))).mean();
  }
  case Loss::Rm: {
    // The reward of a sequence is the value at its last trained token.
    auto reward = [&](const at::Tensor &seq, const at::Tensor &mask) {
      at::Tensor v = model.forward(seq).narrow(1, 1, seq.size(1) - 1);
      at::Tensor last = (mask.cumsum(1) == mask.sum(1, true)) & (mask > 0);
      return (v * last.to(at::kFloat)).sum(1);
    };
    return (-at::log_sigmoid(reward(b.seq, b.lossMask) -
                             reward(b.rejected, b.rejectedMask)))
        .mean();
  }
  }
  throw Error("unknown loss");
}

TrainStats oracle::train(LlamaModel &model, Adam &opt, Loss k, const Batch &b,
                         const LossSettings &s, int64_t minibatches) {
  const int64_t per = b.seq.size(0) / minibatches;
  TrainStats stats;
  for (int64_t mb = 0; mb < minibatches; ++mb) {
    for (auto &[n, p] : model.params())
      if (p.grad().defined())
        p.mutable_grad().zero_();
    at::Tensor l = loss(model, k, b.rows(mb * per, per), s);
    l.backward();
    std::map<std::string, at::Tensor> grads;
    double squares = 0;
    for (auto &[n, p] : model.params())
      if (p.grad().defined()) {
        grads[n] = p.grad().clone();
        squares += p.grad().to(at::kDouble).pow(2).sum().item<double>();
      }
    double norm = std::sqrt(squares), clip = opt.settings().gradClip;
    if (clip > 0 && norm > clip)
      for (auto &[n, g] : grads)
        g.mul_(clip / (norm + 1e-6));
    opt.step(model.params(), grads);
    stats.loss += l.item<double>() / double(minibatches);
    stats.gradNorm = norm;
    stats.gradNormMean += norm / double(minibatches);
  }
  return stats;
}
