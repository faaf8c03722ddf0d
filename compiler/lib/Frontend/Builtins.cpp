//===- Builtins.cpp - model methods and host functions --------------------===//

#include "rlhfc/Frontend/Builtins.h"
#include "rlhfc/Frontend/Units.h"

#include "rlhf/IR/RLHFOps.h"

#include "llvm/ADT/STLExtras.h"

#include <limits>

using namespace rlhfc;
using sema::Head;
using sema::Node;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

RecordType record(std::vector<Field> f) { return RecordType{std::move(f)}; }

TensorType perSeq(TensorKind k, int64_t N) { return {k, DType::F32, {N}}; }

InputSpec tensor(const char *name, TensorKind k) { return InputSpec{name, k}; }

std::vector<BuiltinSpec> makeBuiltins() {
  std::vector<BuiltinSpec> b = {
      {"exact_match",
       "verifiable reward: 1 where the generated answer equals the reference",
       {tensor("seq", TensorKind::Tokens),
        tensor("answer", TensorKind::Answer)},
       {},
       [](int64_t N, int64_t) {
         return record({{"score", perSeq(TensorKind::Score, N)}});
       }},
      {"script_reward",
       "verifiable reward from your own program: 'command' runs as a pool of "
       "worker processes, each reading one JSON request per line on stdin "
       "({\"prompt\", \"response\", \"answer\", \"row\", \"step\", "
       "\"fields\"}) and writing one reply line {\"score\": x} to stdout",
       {tensor("seq", TensorKind::Tokens),
        tensor("answer", TensorKind::Answer)},
       {{"command", 0, 0, 0, false, true,
         "the worker command, run by /bin/sh -c in the folder of this .rlhf "
         "file, e.g. \"python3 verify.py\"",
         /*text=*/true},
        {"workers", 4, 1, 256, true, false,
         "worker processes, and so requests in flight"},
        {"timeout", 30, 0.1, 86400, false, false,
         "seconds a worker may take to reply to one request"},
        {"default", 0, -kInf, kInf, false, false,
         "the score of a row whose worker crashed, timed out or replied "
         "badly, with a warning and a restarted worker; without it such a "
         "row stops the run",
         /*text=*/false, /*optional=*/true}},
       [](int64_t N, int64_t) {
         return record({{"score", perSeq(TensorKind::Score, N)}});
       }},
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
      {"generate",
       Node::Kind::Generate,
       "sample continuations of prompts with the model's LM head",
       "prompt token ids such as 'p.prompt'",
       {{"max_new_tokens", 0, 1, mlir::rlhf::kMaxNewTokens, true, true,
         "tokens to generate"},
        {"n", 1, 1, mlir::rlhf::kMaxSamples, true, false, "samples per prompt"},
        {"temperature", 1.0, 0, 100},
        {"top_p", 1.0, 0, 1},
        {"greedy", 0, 0, 1, true}}},
      {"inference",
       Node::Kind::Inference,
       "a forward pass: logprobs (lm head) or values and scores (value head)",
       "token ids such as 'g.seq'",
       {}},
      {"train",
       Node::Kind::Train,
       "one optimiser pass over the batch with the given loss",
       "a loss such as 'ppo_actor_loss(g, adv)'",
       {{"minibatches", 1, 1, mlir::rlhf::kMaxMinibatches, true, false,
         "optimizer steps per batch"},
        {"epochs", 1, 1, mlir::rlhf::kMaxEpochs, true},
        {"frozen_steps", 0, 0, double(mlir::rlhf::kMaxSteps), true, false,
         "steps the model stays as it started before it trains: a critic "
         "warms up before the policy follows it (OpenRLHF's "
         "freezing_actor_steps, verl's critic_warmup)"}}},
      {"ema",
       Node::Kind::Ema,
       "after training, move this model's weights toward another's: "
       "w = decay*w + (1-decay)*source",
       "the source model",
       {{"decay", 0.99, 0, 1}}},
  };
  return m;
}

} // namespace

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

namespace {

// Shapes: [N] per sequence, [N, S] per token, [] a scalar; `x` is either.
const FnPrimitiveSpec kFnPrimitives[] = {
    {"exp", "(x) -> x", "e to the power x, elementwise"},
    {"log", "(x) -> x", "the natural logarithm, elementwise"},
    {"log1p", "(x) -> x",
     "log(1 + x), accurate where x is near 0, elementwise"},
    {"expm1", "(x) -> x",
     "exp(x) - 1, accurate where x is near 0, elementwise"},
    {"sqrt", "(x) -> x", "the square root, elementwise"},
    {"abs", "(x) -> x", "the absolute value, elementwise"},
    {"sigmoid", "(x) -> x", "1 / (1 + exp(-x)), elementwise"},
    {"softplus", "(x) -> x", "log(1 + exp(x)) without overflow, elementwise"},
    {"stop_gradient", "(x) -> x",
     "x, with no gradient flowing back through it (CISPO's weight)"},
    {"min", "(a, b) -> a", "the smaller of two values, elementwise"},
    {"max", "(a, b) -> a", "the larger of two values, elementwise"},
    {"clamp", "(x, lo, hi) -> x",
     "x limited to [lo, hi]; the gradient passes inside the bounds"},
    {"where", "(cond, a, b) -> a",
     "a where cond is non-zero, else b; cond carries no gradient"},
    {"broadcast", "(x: [N], like: [N, S]) -> [N, S]",
     "a per-sequence value repeated along the sequence of `like`"},
    {"mask_of", "(x: tokens[N, S] or a per-token parameter) -> mask[N, S]",
     "the mask a batch tensor carries: 1 at the generated tokens"},
    {"last", "(mask: [N, S]) -> mask[N, S]",
     "1 at each row's last masked position"},
    {"next", "(x: [N, S], mask: [N, S] = none) -> [N, S]",
     "the value at the next position (the next masked one, given a mask), "
     "0 after the last"},
    {"discounted_cumsum", "(x: [N, S], discount, mask: [N, S]) -> [N, S]",
     "x[t] + discount * out[next masked t], the backward scan of GAE"},
    {"seq_sum", "(x: [N, S], mask: [N, S]) -> [N]",
     "the masked sum of each sequence"},
    {"seq_mean", "(x: [N, S], mask: [N, S]) -> [N]",
     "the masked mean of each sequence"},
    {"seq_var", "(x: [N, S], mask: [N, S], correction = 1) -> [N]",
     "the masked variance of each sequence"},
    {"seq_std", "(x: [N, S], mask: [N, S], correction = 1) -> [N]",
     "the masked standard deviation of each sequence"},
    {"seq_max", "(x: [N, S], mask: [N, S]) -> [N]",
     "the largest masked value of each sequence (0 where none is masked)"},
    {"seq_min", "(x: [N, S], mask: [N, S]) -> [N]",
     "the smallest masked value of each sequence (0 where none is masked)"},
    {"group_sum", "(x: [N], n) -> [N]",
     "the sum over each group of n consecutive samples (one prompt's)"},
    {"group_mean", "(x: [N], n) -> [N]",
     "the mean over each group of n consecutive samples"},
    {"group_var", "(x: [N], n, correction = 1) -> [N]",
     "the variance over each group of n consecutive samples"},
    {"group_std", "(x: [N], n, correction = 1) -> [N]",
     "the standard deviation over each group of n consecutive samples"},
    {"group_max", "(x: [N], n) -> [N]",
     "the largest value of each group of n consecutive samples"},
    {"group_min", "(x: [N], n) -> [N]",
     "the smallest value of each group of n consecutive samples"},
    {"batch_sum", "(x: [N]) -> []", "the sum over the batch"},
    {"batch_mean", "(x: [N]) -> []", "the mean over the batch"},
    {"batch_var", "(x: [N], correction = 1) -> []",
     "the variance over the batch"},
    {"batch_std", "(x: [N], correction = 1) -> []",
     "the standard deviation over the batch"},
    {"batch_max", "(x: [N]) -> []",
     "the largest value of the batch (host functions)"},
    {"batch_min", "(x: [N]) -> []",
     "the smallest value of the batch (host functions)"},
    {"token_sum", "(x: [N, S], mask: [N, S]) -> []",
     "the sum over every masked token of the batch"},
    {"token_mean", "(x: [N, S], mask: [N, S]) -> []",
     "the mean over every masked token of the batch"},
    {"token_var", "(x: [N, S], mask: [N, S], correction = 1) -> []",
     "the variance over every masked token of the batch"},
    {"token_std", "(x: [N, S], mask: [N, S], correction = 1) -> []",
     "the standard deviation over every masked token of the batch"},
    {"token_max", "(x: [N, S], mask: [N, S]) -> []",
     "the largest masked value of the batch (host functions)"},
    {"token_min", "(x: [N, S], mask: [N, S]) -> []",
     "the smallest masked value of the batch (host functions)"},
    {"running_mean", "(x: [N]) -> []",
     "the mean of every row of x this call has seen over the run, this "
     "batch's included (host functions; saved in checkpoints)"},
    {"running_std", "(x: [N]) -> []",
     "the standard deviation (over count - 1) of every row of x this call "
     "has seen over the run, this batch's included: TRL's score scaling "
     "(host functions; saved in checkpoints)"},
};

} // namespace

const FnPrimitiveSpec *rlhfc::lookupFnPrimitive(llvm::StringRef name) {
  for (const FnPrimitiveSpec &p : kFnPrimitives)
    if (name == p.name)
      return &p;
  return nullptr;
}

llvm::ArrayRef<FnPrimitiveSpec> rlhfc::allFnPrimitives() {
  return kFnPrimitives;
}

llvm::ArrayRef<ControlSpec> rlhfc::allControls() {
  static const SettingSpec klParams[] = {
      {"init", 0, 0, kInf, false, true, "the coefficient of the first step"},
      {"target", 0, 0, kInf, false, true,
       "the KL to hold, in the units of the call's `kl`"},
      {"horizon", 10000, 1, kInf, false, false,
       "rows over which the coefficient adapts: each step moves it by at "
       "most 20% of N / horizon"},
  };
  // Skywork-OR1's defaults (its 7B and 32B recipes): a step of 1e-4 up to
  // 0.005, from 0.
  static const SettingSpec entropyParams[] = {
      {"init", 0, 0, kInf, false, true, "the coefficient of the first step"},
      {"target", 0, 0, kInf, false, true,
       "the entropy to hold, in the units of the call's `entropy` (nats "
       "per token)"},
      {"delta", 0.0001, 0, kInf, false, false,
       "how far one step moves the coefficient"},
      {"max", 0.005, 0, kInf, false, false, "the largest coefficient"},
      {"min", 0, 0, kInf, false, false, "the smallest coefficient"},
  };
  static const ControlSpec controls[] = {
      {{"adaptive_kl",
        "(init: number, target: number, horizon: number = 10000) -> number",
        "a KL coefficient the run adapts (Ziegler et al.'s controller, as "
        "TRL's and verl's): give it for a number parameter of a function "
        "whose result `kl` measures the KL, as in `gae(..., kl = "
        "adaptive_kl(0.05, 0.02))`. After each step `coef *= 1 + clip(kl / "
        "target - 1, -0.2, 0.2) * N / horizon`, N the call's rows; logged as "
        "`kl_coef` and saved in checkpoints"},
       klParams,
       "kl",
       "KL",
       "a KL coefficient the run adapts",
       "gae(r, v, g.logprobs, lr, kl = adaptive_kl(0.05, 0.1))",
       "(init, target, horizon = 10000): the coefficient to start from, the "
       "KL to hold, and the rows over which it adapts",
       "gae and grpo_loss do"},
      {{"adaptive_entropy",
        "(init: number, target: number, delta: number = 0.0001, max: number "
        "= 0.005, min: number = 0) -> number",
        "an entropy bonus coefficient the run adapts (Skywork-OR1's adaptive "
        "entropy control): give it for a number parameter of a function "
        "whose result `entropy` measures the policy's entropy, as in "
        "`ppo_entropy_loss(..., entropy = adaptive_entropy(0, 0.2))`. After "
        "each step it rises by delta while the entropy is under target and "
        "falls by delta otherwise, within [min, max], and applies only "
        "while the entropy is under target; logged as `entropy_coef` and "
        "saved in checkpoints"},
       entropyParams,
       "entropy",
       "entropy",
       "an entropy coefficient the run adapts",
       "ppo_entropy_loss(g, adv, entropy = adaptive_entropy(0, 0.2))",
       "(init, target, delta = 0.0001, max = 0.005, min = 0): the coefficient "
       "to start from, the entropy to hold, its step and its bounds",
       "ppo_entropy_loss does"},
  };
  return controls;
}

const ControlSpec *rlhfc::lookupControl(llvm::StringRef name) {
  for (const ControlSpec &c : allControls())
    if (name == c.spec.name)
      return &c;
  return nullptr;
}

std::string rlhfc::settingDefault(const SettingSpec &s) {
  if (s.required)
    return s.text ? " (required, a string in double quotes)" : " (required)";
  if (s.optional)
    return " (optional)";
  return " = " + formatNumber(s.fallback);
}
