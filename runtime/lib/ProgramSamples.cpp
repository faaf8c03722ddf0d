//===- ProgramSamples.cpp - generated samples, written out to read --------===//
//
// `--log-samples N`: every N steps the step's first generation goes to
// OUT/samples/step-S.jsonl, decoded, with the reward each sample got (as
// verl's rollout_data_dir). Each evaluation's generations go to
// OUT/samples/eval-S.jsonl (its validation_data_dir). One JSON object per
// sample: {"step", "row", "prompt", "response", "answer", "score"}, the
// answer where a host reward compared the response with one. The reward is a
// host reward's score (exact_match, script_reward) or, without one, a
// frozen reward model's. The generations are gathered only when a file is
// written.
//
//===----------------------------------------------------------------------===//

#include "ProgramSteps.h"

#include "rlhf/runtime/Files.h"
#include "rlhf/runtime/HostCompute.h"

using namespace rlhf;
using namespace rlhf::exec;
namespace fs = std::filesystem;

namespace {

/// `ids` as text. What a model may generate but the tokenizer drops shows
/// too: a bos as <bos>, an id past the tokenizer's vocabulary (a model's
/// vocabulary may be larger) as <id N>.
std::string decoded(const TextTokenizer &tok, const std::vector<int64_t> &ids) {
  std::string out;
  std::vector<int64_t> run;
  for (int64_t id : ids) {
    const bool bos = id == tok.bos();
    if (!bos && id >= 0 && id < tok.vocabSize()) {
      run.push_back(id);
      continue;
    }
    out +=
        tok.decode(run) + (bos ? "<bos>" : "<id " + std::to_string(id) + ">");
    run.clear();
  }
  return out + tok.decode(run);
}

/// Row `r`'s prompt and response. The prompt is its tokens before the
/// first generated one, without pad and the leading bos; the response is
/// its generated tokens as exact_match reads them (generatedTokens).
/// `predicted` is `ids` without its first column, which `mask` marks.
std::pair<std::string, std::string>
texts(const rlhf_prog *p, const at::TensorAccessor<int64_t, 2> &ids,
      const at::TensorAccessor<int64_t, 2> &predicted,
      const at::TensorAccessor<int64_t, 2> &mask, int64_t r) {
  const TextTokenizer &tok = *p->tokenizer;
  int64_t first = ids.size(1);
  for (int64_t t = 0; t < mask.size(1) && first == ids.size(1); ++t)
    if (mask[r][t] != 0)
      first = t + 1;
  std::vector<int64_t> prompt;
  for (int64_t t = 0; t < first; ++t)
    if (ids[r][t] != tok.pad() && !(prompt.empty() && ids[r][t] == tok.bos()))
      prompt.push_back(ids[r][t]);
  return {
      decoded(tok, prompt),
      decoded(tok, generatedTokens(predicted, mask, r, tok.pad(), tok.eos()))};
}

/// Answer row `a`: the dataset's text where the value carries it (as
/// script_reward reads it), else its token ids decoded.
std::string answerText(const rlhf_prog *p, const rlhf_value &answer,
                       int64_t a) {
  if (answer.examples && size_t(a) < answer.examples->size() &&
      (*answer.examples)[size_t(a)].count("answer"))
    return (*answer.examples)[size_t(a)].at("answer");
  std::vector<int64_t> ids;
  const at::Tensor row = answer.t[a].to(at::kCPU).to(at::kLong);
  for (int64_t i = 0; i < row.size(0); ++i)
    if (const int64_t id = row[i].item<int64_t>(); id != p->tokenizer->pad())
      ids.push_back(id);
  return decoded(*p->tokenizer, ids);
}

} // namespace

void rlhf::exec::noteGenerated(rlhf_prog *p, rlhf_value *seq) {
  if (p->samples.interval > 0 && !p->samples.seq)
    p->samples.seq = seq;
}

void rlhf::exec::noteReward(rlhf_prog *p, rlhf_value *score, bool host,
                            rlhf_value *answer) {
  SampleLog &s = p->samples;
  if (s.interval <= 0 || !s.seq || score->rows != s.seq->rows)
    return;
  // A host reward is the reward; a reward model's counts only without one.
  if (!s.score || (host && !s.hostScore)) {
    s.score = score;
    s.hostScore = host;
    s.answer = answer;
  }
}

void rlhf::exec::writeSamples(rlhf_prog *p, const std::string &file,
                              int64_t step, int64_t firstRow, int64_t rows) {
  SampleLog &s = p->samples;
  rlhf_value *seqV = s.seq, *scoreV = s.score, *answerV = s.answer;
  s.seq = s.score = s.answer = nullptr;
  if (s.interval <= 0 || !seqV)
    return;
  // Collective: every rank reached here with the same values.
  rlhf_value *seq = gathered(p, seqV);
  rlhf_value *score = scoreV ? gathered(p, scoreV) : nullptr;
  // A dataset column is replicated already, and keeps its rows' text.
  rlhf_value *answer =
      answerV && answerV->layout ? gathered(p, answerV) : answerV;
  if (p->rank != 0)
    return;
  const int64_t perAnswer =
      answer && answer->rows > 0 && seq->rows % answer->rows == 0
          ? seq->rows / answer->rows
          : 0;
  const at::Tensor ids = seq->t.to(at::kCPU).to(at::kLong);
  const at::Tensor mask =
      seq->mask.defined()
          ? seq->mask.to(at::kCPU).to(at::kLong)
          : at::zeros({ids.size(0), ids.size(1) - 1}, at::kLong);
  const at::Tensor scores =
      score ? score->t.to(at::kCPU).to(at::kDouble) : at::Tensor();
  const at::Tensor predicted = ids.narrow(1, 1, ids.size(1) - 1);
  const auto idsA = ids.accessor<int64_t, 2>(),
             predictedA = predicted.accessor<int64_t, 2>(),
             maskA = mask.accessor<int64_t, 2>();
  std::string out;
  const int64_t n = rows < 0 ? ids.size(0) : std::min(rows, ids.size(0));
  for (int64_t r = 0; r < n; ++r) {
    auto [prompt, response] = texts(p, idsA, predictedA, maskA, r);
    nlohmann::ordered_json j;
    j["step"] = step;
    j["row"] = firstRow + r;
    j["prompt"] = prompt;
    j["response"] = response;
    if (perAnswer)
      j["answer"] = answerText(p, *answer, r / perAnswer);
    if (scores.defined())
      j["score"] = scores[r].item<double>();
    // Byte-level tokens may end mid-character: replace, do not throw.
    out +=
        j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  const fs::path dir = fs::path(p->outDir) / "samples";
  fs::create_directories(dir);
  // A file starts with its first rows: a step redone after --resume
  // rewrites its file rather than adding to it.
  writeTextFile((dir / file).string(), out,
                firstRow == 0 ? std::ios::trunc : std::ios::app);
}
