//===- Sampling.cpp - the next token from the last logits -----------------===//

#include "Sampling.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

using namespace rlhf;

namespace {

std::pair<at::Tensor, at::Tensor> sampleRows(const at::Tensor &last,
                                             const at::Tensor &u,
                                             const GenerateOptions &o) {
  at::Tensor scaled =
      o.greedy ? last : last / std::max(o.temperature, kMinTemperature);
  at::Tensor logp = at::log_softmax(scaled, -1);
  scaled = at::Tensor();
  at::Tensor next;
  if (o.greedy) {
    next = logp.argmax(-1);
  } else {
    at::Tensor probs = logp.exp();
    if (o.topP < 1.0) {
      auto [sorted, idx] = probs.sort(-1, /*descending=*/true);
      at::Tensor cum = sorted.cumsum(-1);
      // Keep the smallest prefix whose mass reaches top_p, and at least the
      // most likely token: top_p = 0 is greedy, as in vLLM and transformers.
      at::Tensor drop = (cum - sorted) >= o.topP;
      drop.narrow(-1, 0, 1).fill_(false);
      cum = at::Tensor();
      sorted = sorted.masked_fill(drop, 0);
      probs = at::zeros_like(probs).scatter(-1, idx, sorted);
    }
    at::Tensor cum = probs.to(at::kDouble).cumsum(-1);
    at::Tensor target = u * cum.select(1, cum.size(1) - 1);
    next = (cum < target.unsqueeze(1)).sum(-1).clamp_max(probs.size(1) - 1);
  }
  at::Tensor lp = logp.gather(-1, next.unsqueeze(-1)).squeeze(-1);
  return {next, lp};
}

} // namespace

std::pair<at::Tensor, at::Tensor> rlhf::sampleTokens(const at::Tensor &logits,
                                                     const at::Tensor &u,
                                                     const GenerateOptions &o,
                                                     int64_t chunkBytes) {
  const int64_t B = logits.size(0), V = logits.size(1);
  const int64_t rows = std::max<int64_t>(1, chunkBytes / (V * 4));
  if (B <= rows)
    return sampleRows(logits, u, o);
  std::vector<at::Tensor> next, lp;
  for (int64_t r = 0; r < B; r += rows) {
    const int64_t n = std::min(rows, B - r);
    auto [a, b] = sampleRows(logits.narrow(0, r, n),
                             u.defined() ? u.narrow(0, r, n) : u, o);
    next.push_back(a);
    lp.push_back(b);
  }
  return {at::cat(next), at::cat(lp)};
}
