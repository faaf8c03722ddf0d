//===- HostCompute.cpp - host functions written in C++ -------------------===//

#include "rlhf/runtime/HostCompute.h"
#include "rlhf/runtime/Error.h"

#include <map>

using namespace rlhf;

std::vector<int64_t>
rlhf::generatedTokens(const at::TensorAccessor<int64_t, 2> &tokens,
                      const at::TensorAccessor<int64_t, 2> &mask, int64_t r,
                      int64_t pad, int64_t eos) {
  std::vector<int64_t> out;
  for (int64_t t = 0; t < tokens.size(1); ++t) {
    if (!mask[r][t] || tokens[r][t] == pad)
      continue;
    if (tokens[r][t] == eos)
      break;
    out.push_back(tokens[r][t]);
  }
  return out;
}

at::Tensor rlhf::exactMatch(const at::Tensor &seq, const at::Tensor &mask,
                            const at::Tensor &answer, int64_t pad, int64_t eos,
                            std::vector<std::string> *predictions) {
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
    const std::vector<int64_t> gen = generatedTokens(s, m, i, pad, eos);
    std::vector<int64_t> want;
    for (int64_t t = 0; t < answer.size(1); ++t)
      if (a[i / n][t] != pad)
        want.push_back(a[i / n][t]);
    out[i] = gen == want ? 1.0 : 0.0;
    if (predictions) {
      std::string key;
      for (int64_t id : gen)
        key += (key.empty() ? "" : ",") + std::to_string(id);
      predictions->push_back(std::move(key));
    }
  }
  return out;
}

at::Tensor rlhf::majorityVote(const at::Tensor &scores,
                              const std::vector<std::string> &predictions) {
  const int64_t P = scores.size(0), k = scores.dim() > 1 ? scores.size(1) : 1;
  if (int64_t(predictions.size()) != P * k)
    throw Error("majority vote: " + std::to_string(predictions.size()) +
                " predictions for " + std::to_string(P) + " prompts of " +
                std::to_string(k) + " samples");
  at::Tensor x = scores.to(at::kDouble).reshape({P, k}).contiguous();
  at::Tensor out = at::zeros({P}, at::kDouble);
  for (int64_t j = 0; j < P; ++j) {
    std::map<std::string, int64_t> count;
    int64_t best = 0, pick = 0;
    for (int64_t i = 0; i < k; ++i)
      if (int64_t c = ++count[predictions[size_t(j * k + i)]]; c > best)
        best = c, pick = i;
    out[j] = x[j][pick];
  }
  return out;
}
