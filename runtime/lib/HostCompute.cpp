//===- HostCompute.cpp - advantages and rewards on the controller ---------===//

#include "rlhf/runtime/HostCompute.h"
#include "rlhf/runtime/Error.h"

#include <ATen/core/grad_mode.h>

using namespace rlhf;

GaeResult rlhf::gae(const at::Tensor &score, const at::Tensor &values,
                    const at::Tensor &logprobs, const at::Tensor &refLogprobs,
                    const at::Tensor &mask, double gamma, double lam,
                    double kl) {
  at::NoGradGuard ng;
  const int64_t N = mask.size(0), T = mask.size(1);
  at::Tensor m = mask.to(at::kFloat);
  // Per-token reward: -kl * (logp - ref), plus the score on the last
  // generated token of each row.
  at::Tensor reward = -kl * (logprobs - refLogprobs) * m;
  at::Tensor idx = at::arange(T, at::kLong).unsqueeze(0).expand({N, T});
  at::Tensor last =
      (idx * mask.to(at::kLong)).argmax(1); // last masked position
  reward.scatter_add_(1, last.unsqueeze(1), score.to(at::kFloat).unsqueeze(1));
  at::Tensor v = values * m;
  at::Tensor adv = at::zeros({N, T});
  at::Tensor running = at::zeros({N});
  for (int64_t t = T - 1; t >= 0; --t) {
    at::Tensor next = t + 1 < T ? v.select(1, t + 1) : at::zeros({N});
    at::Tensor mt = m.select(1, t);
    at::Tensor delta = reward.select(1, t) + gamma * next - v.select(1, t);
    running = (delta + gamma * lam * running) * mt + running * (1 - mt);
    adv.select(1, t).copy_(running * mt);
  }
  at::Tensor returns = (adv + v) * m;
  double count = std::max(1.0, m.sum().item<double>());
  double mean = (adv * m).sum().item<double>() / count;
  double var = (((adv - mean) * m).pow(2)).sum().item<double>() / count;
  at::Tensor whitened = (adv - mean) / std::sqrt(var + 1e-8) * m;
  return {whitened, returns};
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

at::Tensor rlhf::grpoAdvantages(const at::Tensor &score, int64_t group) {
  at::Tensor g = grouped(score, group);
  at::Tensor mean = g.mean(1, true);
  at::Tensor std =
      group > 1 ? g.std(1, /*unbiased=*/true, true) : at::zeros_like(mean);
  return ((g - mean) / (std + 1e-6)).view({-1});
}

at::Tensor rlhf::rlooAdvantages(const at::Tensor &score, int64_t group) {
  if (group < 2)
    throw Error("RLOO needs at least 2 samples per prompt");
  at::Tensor g = grouped(score, group);
  at::Tensor others = (g.sum(1, true) - g) / double(group - 1);
  return (g - others).view({-1});
}

at::Tensor rlhf::remaxAdvantages(const at::Tensor &score,
                                 const at::Tensor &baseline) {
  if (score.sizes() != baseline.sizes())
    throw Error("ReMax needs one baseline score per sample");
  return score.to(at::kFloat) - baseline.to(at::kFloat);
}

at::Tensor rlhf::klPenalty(const at::Tensor &score, const at::Tensor &logprobs,
                           const at::Tensor &refLogprobs,
                           const at::Tensor &mask, double coef) {
  return score.to(at::kFloat) -
         coef * ((logprobs - refLogprobs) * mask.to(at::kFloat)).sum(1);
}

at::Tensor rlhf::exactMatch(const at::Tensor &seq, const at::Tensor &mask,
                            const at::Tensor &answer, int64_t pad) {
  const int64_t N = seq.size(0), A = answer.size(0);
  if (A == 0 || N % A)
    throw Error("exact_match: " + std::to_string(N) +
                " sequences do not pair with " + std::to_string(A) +
                " answers");
  const int64_t n = N / A;
  at::Tensor out = at::zeros({N});
  auto s = seq.accessor<int64_t, 2>();
  auto m = mask.accessor<int64_t, 2>();
  auto a = answer.accessor<int64_t, 2>();
  for (int64_t i = 0; i < N; ++i) {
    std::vector<int64_t> gen, want;
    for (int64_t t = 0; t < seq.size(1); ++t)
      if (m[i][t] && s[i][t] != pad)
        gen.push_back(s[i][t]);
    for (int64_t t = 0; t < answer.size(1); ++t)
      if (a[i / n][t] != pad)
        want.push_back(a[i / n][t]);
    if (gen.size() > want.size())
      gen.resize(want.size());
    out[i] = gen == want ? 1.0 : 0.0;
  }
  return out;
}
