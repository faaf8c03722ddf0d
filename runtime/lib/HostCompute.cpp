//===- HostCompute.cpp - host functions written in C++ -------------------===//

#include "rlhf/runtime/HostCompute.h"
#include "rlhf/runtime/Error.h"

using namespace rlhf;

at::Tensor rlhf::exactMatch(const at::Tensor &seq, const at::Tensor &mask,
                            const at::Tensor &answer, int64_t pad,
                            int64_t eos) {
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
    for (int64_t t = 0; t < seq.size(1); ++t) {
      if (!m[i][t] || s[i][t] == pad)
        continue;
      if (s[i][t] == eos)
        break;
      gen.push_back(s[i][t]);
    }
    for (int64_t t = 0; t < answer.size(1); ++t)
      if (a[i / n][t] != pad)
        want.push_back(a[i / n][t]);
    out[i] = gen == want ? 1.0 : 0.0;
  }
  return out;
}
