//===- ProgramReward.cpp - script_reward: rewards from the user's program -===//
//
// Rank 0 turns every generated sample into one JSON request, scores the
// batch with the worker pool of the call's command (ExternalReward.h) and
// broadcasts the scores, so that every rank holds them as it holds any
// host-computed value. The other ranks wait in broadcasts of a flag, sent
// every few seconds while the workers score, so that a batch may take
// longer than a collective's timeout; when rank 0 fails, it exits and the
// launcher ends the job naming it.
//
// A request, one line:
//   {"row": 5, "step": 1, "prompt": "3+4=", "response": "7",
//    "answer": "7", "fields": {"prompt": "3+4=", "answer": "7"}}
// `prompt` and `response` are decoded from the sample's tokens (what the
// model read and wrote, without pad, BOS and EOS; the response ends at its
// first EOS); `answer` and `fields` are the dataset row's own text, not
// truncated to max_response_len.
//
//===----------------------------------------------------------------------===//

#include "ProgramSteps.h"

using namespace rlhf;
using namespace rlhf::exec;

namespace {

/// The pool of the call's settings, started at its first use.
ExternalRewardPool &poolFor(rlhf_prog *p, const Settings &s) {
  ExternalRewardOptions o;
  o.command = s.text("command");
  o.directory = s.hasText("cwd") ? s.text("cwd") : "";
  o.workers = int64_t(s.get("workers", 4));
  o.timeout = s.get("timeout", 30);
  if (s.has("default"))
    o.fallback = s.get("default", 0);
  if (s.hasText("at"))
    o.where = calledAt("script_reward", s);
  // 0: still scoring; scriptReward sends the 1 that precedes the scores.
  o.heartbeat = [p] {
    at::Tensor more = at::zeros({1}, at::kLong);
    p->world->broadcast(more, 0);
  };
  // Often enough that the other ranks' wait never reaches the timeout.
  o.heartbeatInterval = std::min(o.heartbeatInterval, p->commTimeoutS / 3);
  std::string key =
      o.command + '\n' + o.directory + '\n' + std::to_string(o.workers) + '\n' +
      std::to_string(o.timeout) + '\n' +
      (o.fallback ? std::to_string(*o.fallback) : "none") + '\n' + o.where;
  std::unique_ptr<ExternalRewardPool> &pool = p->rewardPools[key];
  if (!pool)
    pool = std::make_unique<ExternalRewardPool>(std::move(o));
  return *pool;
}

} // namespace

rlhf_value *rlhf::exec::scriptReward(rlhf_prog *p, rlhf_value *answerIn,
                                     const std::vector<rlhf_value *> &x,
                                     const Settings &s) {
  at::Tensor seq = x[0]->t, mask = x[0]->mask;
  if (!mask.defined())
    throw Error("script_reward needs generated sequences (a generate's seq)");
  const int64_t N = x[0]->rows, A = x[1]->rows;
  if (A == 0 || N % A)
    throw Error("script_reward: " + std::to_string(N) +
                " sequences do not pair with " + std::to_string(A) +
                " answers");
  at::Tensor score = at::zeros({N}, at::kFloat);
  if (p->rank == 0) {
    const TextTokenizer &tok = *p->tokenizer;
    const int64_t pad = tok.pad(), bos = tok.bos(), eos = tok.eos();
    at::Tensor ids = seq.to(at::kLong).contiguous();
    at::Tensor gen = mask.to(at::kLong).contiguous();
    at::Tensor ans = x[1]->t.to(at::kLong).contiguous();
    auto sq = ids.accessor<int64_t, 2>();
    auto m = gen.accessor<int64_t, 2>();
    auto a = ans.accessor<int64_t, 2>();
    const int64_t T = ids.size(1), n = N / A;
    auto decode = [&](std::vector<int64_t> v) {
      v.erase(std::remove_if(v.begin(), v.end(),
                             [&](int64_t id) {
                               return id == pad || id == bos || id == eos;
                             }),
              v.end());
      return tok.decode(v);
    };
    // The dataset's rows when the answer is its column, as passed.
    const std::vector<Example> *rows = answerIn->examples.get();
    if (rows && int64_t(rows->size()) != A)
      rows = nullptr;
    std::vector<std::string> requests;
    for (int64_t i = 0; i < N; ++i) {
      // Token j was generated where mask[j - 1] is set.
      int64_t first = T;
      for (int64_t j = 1; j < T && first == T; ++j)
        if (m[i][j - 1])
          first = j;
      std::vector<int64_t> prompt, response, answer;
      for (int64_t j = 0; j < first; ++j)
        prompt.push_back(sq[i][j]);
      for (int64_t j = first; j < T && sq[i][j] != eos; ++j)
        if (m[i][j - 1])
          response.push_back(sq[i][j]);
      const int64_t r = i / n;
      nlohmann::json fields = nlohmann::json::object();
      std::string answerText;
      if (rows && (*rows)[size_t(r)].count("answer")) {
        for (auto &[k, v] : (*rows)[size_t(r)])
          fields[k] = v;
        answerText = (*rows)[size_t(r)].at("answer");
      } else {
        for (int64_t j = 0; j < ans.size(1); ++j)
          answer.push_back(a[r][j]);
        answerText = decode(answer);
        fields["answer"] = answerText;
      }
      nlohmann::json req = {{"row", i},
                            {"step", p->stepIndex + 1},
                            {"prompt", decode(prompt)},
                            {"response", decode(response)},
                            {"answer", answerText},
                            {"fields", fields}};
      // Byte-level BPE may cut a character: send U+FFFD, not an error.
      requests.push_back(
          req.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    std::vector<double> scores = poolFor(p, s).score(requests);
    for (int64_t i = 0; i < N; ++i)
      score[i] = scores[size_t(i)];
    at::Tensor done = at::ones({1}, at::kLong);
    p->world->broadcast(done, 0);
  } else {
    at::Tensor flag = at::zeros({1}, at::kLong);
    do
      p->world->broadcast(flag, 0);
    while (flag.item<int64_t>() == 0);
  }
  p->world->broadcast(score, 0);
  p->record("reward", score.mean().item<double>(), true);
  rlhf_value *v = tensorValue(p, score, at::Tensor(), N, std::nullopt);
  noteReward(p, v, true, answerIn);
  return recordValue(p, {{"score", v}});
}
