//===- Builtins.cpp - model methods and host functions --------------------===//

#include "rlhfc/Frontend/Builtins.h"

#include "llvm/ADT/STLExtras.h"

#include <limits>

using namespace rlhfc;
using sema::Head;
using sema::Node;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

RecordType record(std::vector<Field> f) { return RecordType{std::move(f)}; }

TensorType perToken(TensorKind k, int64_t N, int64_t S) {
  return {k, DType::F32, {N, S}};
}
TensorType perSeq(TensorKind k, int64_t N) { return {k, DType::F32, {N}}; }

InputSpec tensor(const char *name, TensorKind k) { return InputSpec{name, k, {}}; }
InputSpec genRecord(const char *name) {
  return InputSpec{name,
                   TensorKind::Tokens,
                   {{"seq", TensorKind::Tokens}, {"logprobs", TensorKind::Logprobs}}};
}

std::vector<BuiltinSpec> makeBuiltins() {
  auto lossOf = [](int64_t N, int64_t) {
    return record({{"loss", {TensorKind::Loss, DType::F32, {N}}}});
  };
  auto advPerSeq = [](int64_t N, int64_t) {
    return record({{"advantages", perSeq(TensorKind::Advantages, N)}});
  };
  std::vector<BuiltinSpec> b = {
      {"gae",
       "PPO advantages and returns by generalized advantage estimation, with a "
       "per-token KL penalty against the reference model",
       {tensor("score", TensorKind::Score), tensor("values", TensorKind::Values),
        tensor("logprobs", TensorKind::Logprobs),
        tensor("ref_logprobs", TensorKind::Logprobs)},
       {{"gamma", 1.0, 0, 1}, {"lam", 0.95, 0, 1}, {"kl", 0.0, 0, kInf}},
       std::nullopt,
       [](int64_t N, int64_t S) {
         return record({{"advantages", perToken(TensorKind::Advantages, N, S)},
                        {"returns", perToken(TensorKind::Returns, N, S)}});
       }},
      {"grpo_adv",
       "GRPO advantages: each score normalised by the mean and std of its group",
       {tensor("score", TensorKind::Score)},
       {{"group", 0, 2, 1 << 20, true, true, "samples per prompt"}},
       std::nullopt,
       advPerSeq},
      {"remax_adv",
       "ReMax/REINFORCE advantages: score minus the greedy baseline's score",
       {tensor("score", TensorKind::Score), tensor("baseline", TensorKind::Score)},
       {},
       std::nullopt,
       advPerSeq},
      {"rloo_adv",
       "RLOO advantages: score minus the mean of the other samples of its group",
       {tensor("score", TensorKind::Score)},
       {{"group", 0, 2, 1 << 20, true, true, "samples per prompt"}},
       std::nullopt,
       advPerSeq},
      {"kl_penalty",
       "reward shaping: score minus coef times the sequence KL to the reference",
       {tensor("score", TensorKind::Score), tensor("logprobs", TensorKind::Logprobs),
        tensor("ref_logprobs", TensorKind::Logprobs)},
       {{"coef", 0.1, 0, kInf}},
       std::nullopt,
       [](int64_t N, int64_t) { return record({{"score", perSeq(TensorKind::Score, N)}}); }},
      {"exact_match",
       "verifiable reward: 1 where the generated answer equals the reference",
       {tensor("seq", TensorKind::Tokens), tensor("answer", TensorKind::Answer)},
       {},
       std::nullopt,
       [](int64_t N, int64_t) { return record({{"score", perSeq(TensorKind::Score, N)}}); }},
      {"ppo_actor_loss",
       "clipped PPO policy loss",
       {genRecord("gen"), tensor("advantages", TensorKind::Advantages)},
       {{"clip", 0.2, 0, kInf}},
       Head::LM,
       lossOf},
      {"ppo_value_loss",
       "clipped value loss against the GAE returns",
       {InputSpec{"values", TensorKind::Values,
                  {{"seq", TensorKind::Tokens}, {"values", TensorKind::Values}}},
        tensor("returns", TensorKind::Returns)},
       {{"clip", 0.2, 0, kInf}},
       Head::Value,
       lossOf},
      {"grpo_loss",
       "GRPO policy loss: clipped ratio times group advantages plus a KL term",
       {genRecord("gen"), tensor("advantages", TensorKind::Advantages),
        tensor("ref_logprobs", TensorKind::Logprobs)},
       {{"clip", 0.2, 0, kInf}, {"kl", 0.04, 0, kInf}},
       Head::LM,
       lossOf},
      {"dpo_loss",
       "direct preference optimisation loss over chosen/rejected pairs",
       {tensor("chosen", TensorKind::Tokens), tensor("rejected", TensorKind::Tokens),
        tensor("ref_chosen", TensorKind::Logprobs),
        tensor("ref_rejected", TensorKind::Logprobs)},
       {{"beta", 0.1, 0, kInf}},
       Head::LM,
       lossOf},
      {"sft_loss",
       "next-token cross-entropy on whole sequences",
       {tensor("seq", TensorKind::Tokens)},
       {},
       Head::LM,
       lossOf},
      {"rm_loss",
       "pairwise reward-model loss: -log sigmoid(r(chosen) - r(rejected))",
       {tensor("chosen", TensorKind::Tokens), tensor("rejected", TensorKind::Tokens)},
       {},
       Head::Value,
       lossOf},
  };
  for (BuiltinSpec &s : b) {
    s.signature = "(";
    for (size_t i = 0; i < s.inputs.size(); ++i)
      s.signature += (i ? ", " : "") + s.inputs[i].name;
    s.signature += ")";
  }
  return b;
}

const std::vector<BuiltinSpec> &builtins() {
  static const std::vector<BuiltinSpec> b = makeBuiltins();
  return b;
}

const std::vector<MethodSpec> &methods() {
  static const std::vector<MethodSpec> m = {
      {"generate", Node::Kind::Generate,
       "sample continuations of prompts with the model's LM head",
       "prompt token ids such as 'p.prompt'",
       {{"max_new_tokens", 0, 1, 1 << 20, true, true, "tokens to generate"},
        {"n", 1, 1, 1024, true, false, "samples per prompt"},
        {"temperature", 1.0, 0, 100},
        {"top_p", 1.0, 0, 1},
        {"greedy", 0, 0, 1, true}}},
      {"inference", Node::Kind::Inference,
       "a forward pass: logprobs (lm head) or values and scores (value head)",
       "token ids such as 'g.seq'",
       {}},
      {"train", Node::Kind::Train,
       "one optimiser pass over the batch with the given loss",
       "a loss such as 'ppo_actor_loss(g, adv)'",
       {{"minibatches", 1, 1, 1 << 20, true, false, "optimizer steps per batch"},
        {"epochs", 1, 1, 1000, true}}},
      {"ema", Node::Kind::Ema,
       "after training, move this model's weights toward another's: "
       "w = decay*w + (1-decay)*source",
       "the source model",
       {{"decay", 0.99, 0, 1}}},
  };
  return m;
}

} // namespace

std::string InputSpec::fieldList() const {
  std::string s = "{";
  for (size_t i = 0; i < fields.size(); ++i)
    s += (i ? ", " : "") + fields[i].first;
  return s + "}";
}

const BuiltinSpec *rlhfc::lookupBuiltin(llvm::StringRef name) {
  for (const BuiltinSpec &b : builtins())
    if (name == b.name)
      return &b;
  return nullptr;
}

const MethodSpec *rlhfc::lookupMethod(llvm::StringRef name) {
  for (const MethodSpec &m : methods())
    if (name == m.name)
      return &m;
  return nullptr;
}

std::vector<std::string> rlhfc::builtinNames() {
  std::vector<std::string> out;
  for (const BuiltinSpec &b : builtins())
    out.push_back(b.name);
  return out;
}

std::vector<std::string> rlhfc::methodNames() {
  std::vector<std::string> out;
  for (const MethodSpec &m : methods())
    out.push_back(m.name);
  return out;
}

llvm::ArrayRef<BuiltinSpec> rlhfc::allBuiltins() { return builtins(); }
llvm::ArrayRef<MethodSpec> rlhfc::allMethods() { return methods(); }
