//===- FnBuiltinsTest.cpp - the stdlib's functions equal the built-ins ----===//
//
// The built-in advantage estimators and losses as the stdlib re-expresses
// them in .rlhf (stdlib/algorithms/estimators.rlhf, losses.rlhf), compiled
// by rlhfc into Inputs/stdlib.fn: the same values as the C++ on random
// inputs, and the same loss, gradients and updates of a tiny model, within
// 1e-6; and the C entry points rlhf_apply and rlhf_train_fn.
//
//===----------------------------------------------------------------------===//

#include "FnTestUtil.h"

using namespace rlhf;
using namespace rlhf::fntest;

namespace {

//===----------------------------------------------------------------------===//
// The built-in host functions, re-expressed
//===----------------------------------------------------------------------===//

/// A generation mask [N, T]: each row's tokens from a random start for a
/// random length; row 1 has none.
at::Tensor generationMask(int64_t N, int64_t T, at::Generator &gen) {
  at::Tensor m = at::zeros({N, T});
  for (int64_t i = 0; i < N; ++i) {
    if (i == 1)
      continue;
    int64_t start = at::randint(0, T / 2, {1}, gen, at::kLong).item<int64_t>();
    int64_t len =
        at::randint(1, T - start + 1, {1}, gen, at::kLong).item<int64_t>();
    m[i].narrow(0, start, len).fill_(1);
  }
  return m;
}

TEST(FnBuiltins, GaeMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  const int64_t N = 6, T = 8;
  int k = 0; // stdlib-calls.rlhf's gae calls, in order
  for (auto [gamma, lam, kl] :
       {std::tuple{1.0, 0.95, 0.0}, std::tuple{0.99, 0.9, 0.1},
        std::tuple{0.9, 0.5, 0.05}}) {
    at::Tensor score = at::randn({N}, gen), values = at::randn({N, T}, gen),
               lp = at::randn({N, T}, gen), ref = at::randn({N, T}, gen);
    at::Tensor mask = generationMask(N, T, gen);
    GaeResult want = gae(score, values, lp, ref, mask, gamma, lam, kl);
    auto got = run(stdlibProgram("gae", k++), {score, values, lp, ref},
                   {{}, {}, mask});
    std::string what = "gamma " + std::to_string(gamma) + " lam " +
                       std::to_string(lam) + " kl " + std::to_string(kl);
    expectClose(got[0], want.advantages, "advantages, " + what);
    expectClose(got[1], want.returns, "returns, " + what);
  }
}

TEST(FnBuiltins, GroupEstimatorsMatch) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(12);
  at::Tensor score = at::randn({12}, gen), base = at::randn({12}, gen);
  for (int64_t G : {2, 3, 4}) { // stdlib-calls.rlhf's groups, in order
    int k = int(G - 2);
    expectClose(run1(stdlibProgram("grpo_adv", k), {score}),
                grpoAdvantages(score, G), "grpo, group " + std::to_string(G));
    expectClose(run1(stdlibProgram("rloo_adv", k), {score}),
                rlooAdvantages(score, G), "rloo, group " + std::to_string(G));
  }
  expectClose(run1(stdlibProgram("remax_adv"), {score, base}),
              remaxAdvantages(score, base), "remax");
}

TEST(FnBuiltins, KlPenaltyMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(13);
  const int64_t N = 5, T = 7;
  at::Tensor score = at::randn({N}, gen), lp = at::randn({N, T}, gen),
             ref = at::randn({N, T}, gen), mask = generationMask(N, T, gen);
  int k = 0; // stdlib-calls.rlhf's kl_penalty calls, in order
  for (double coef : {0.0, 0.1, 0.05}) {
    // The mask is the one the logprobs carry.
    expectClose(
        run1(stdlibProgram("kl_penalty", k++), {score, lp, ref}, {{}, mask}),
        klPenalty(score, lp, ref, mask, coef),
        "kl penalty, coef " + std::to_string(coef));
  }
}

//===----------------------------------------------------------------------===//
// The built-in losses, re-expressed: one train step each way
//===----------------------------------------------------------------------===//

ModelConfig tiny(bool valueHead) {
  ModelConfig cfg;
  cfg.shape = ModelShape{2, 64, 4, 2, 176, 512, false, valueHead};
  cfg.maxSeq = 64;
  return cfg;
}

struct Trained {
  TrainStats stats;
  std::map<std::string, at::Tensor> params, grads;
};

/// One trainStep of a fresh tiny model: the parameters after it, and the
/// gradients of its last minibatch.
Trained trainOnce(bool valueHead, const TrainBatch &b, const TrainOptions &o) {
  ModelConfig cfg = tiny(valueHead);
  ParamMap p = initParams(cfg, 7);
  for (auto &[n, t] : p)
    t.requires_grad_(true);
  LlamaModel m(cfg, p, {});
  // Adam's first steps move each weight by about lr * g / (|g| + eps): with
  // the usual eps, a gradient near eps turns a rounding difference into a
  // large change of the update. A large eps keeps the update proportional
  // to the gradient, so that the second minibatch's gradients compare too.
  AdamSettings as;
  as.lr = 1e-3;
  as.eps = 1.0;
  Adam opt(as);
  Trained r;
  r.stats = trainStep(m, opt, b, o);
  for (auto &[n, t] : m.params()) {
    r.params[n] = t.detach().clone();
    r.grads[n] = t.grad().defined() ? t.grad().clone() : at::Tensor();
  }
  return r;
}

/// The built-in loss `builtin` and fn code `code` train alike: one step per
/// split of the batch (1 or 2 minibatches of 1 or 2 micro-batches), with
/// the loss, the gradient norm, every gradient and every updated parameter
/// within `rel` relative.
void expectSameTraining(LossKind builtin, const std::string &code,
                        bool valueHead, const TrainBatch &b,
                        const TrainBatch &fnBatch, LossSettings settings = {},
                        int64_t pad = 0, double rel = 1e-6) {
  FnProgram fn = FnProgram::parse(code);
  for (auto [minibatches, micro] :
       {std::pair<int64_t, int64_t>{1, 1}, {2, 1}, {1, 2}, {2, 2}}) {
    TrainOptions o;
    o.loss = builtin;
    o.settings = settings;
    o.minibatches = minibatches;
    o.microBatches = micro;
    TrainOptions of;
    of.lossFn = &fn;
    of.pad = pad;
    of.minibatches = minibatches;
    of.microBatches = micro;
    Trained want = trainOnce(valueHead, b, o);
    Trained got = trainOnce(valueHead, fnBatch, of);
    std::string what = fn.name() + ", " + std::to_string(minibatches) +
                       " minibatches of " + std::to_string(micro) +
                       " micro-batches";
    expectNear(got.stats.loss, want.stats.loss, what + ": loss", rel);
    expectNear(got.stats.gradNorm, want.stats.gradNorm, what + ": grad norm",
               rel);
    ASSERT_GT(want.stats.gradNorm, 0) << what;
    for (auto &[n, g] : want.grads) {
      ASSERT_TRUE(g.defined()) << what << ": " << n;
      expectClose(got.grads.at(n), g, what + ": grad of " + n, rel);
      expectClose(got.params.at(n), want.params.at(n), what + ": " + n, rel);
    }
  }
}

/// Token ids in [1, 512) with a few pads (0) in the prompts.
at::Tensor tokens(int64_t N, int64_t S, at::Generator &gen) {
  at::Tensor seq = at::randint(1, 512, {N, S}, gen, at::kLong);
  seq.select(1, 0).narrow(0, 0, N / 2).fill_(0);
  return seq;
}

/// The policy's logprobs at initialisation plus noise, so that ratios are
/// clipped on both sides.
at::Tensor noisyLogprobs(const at::Tensor &seq, at::Generator &gen) {
  ModelConfig cfg = tiny(false);
  LlamaModel m(cfg, initParams(cfg, 7), {});
  torch::NoGradGuard ng;
  at::Tensor lp = tokenLogprobs(m.forward(seq), seq);
  return lp + 0.3 * at::randn(lp.sizes(), gen);
}

TEST(FnBuiltins, PpoActorLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(21);
  const int64_t N = 8, S = 12;
  TrainBatch b;
  b.seq = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.oldLogprobs = noisyLogprobs(b.seq, gen);
  b.advantages = at::randn({N, S - 1}, gen);
  LossSettings ls;
  ls.clip = 0.2;
  TrainBatch fb;
  fb.fnInputs = {b.seq, b.oldLogprobs, b.advantages};
  fb.fnMasks = {b.lossMask};
  expectSameTraining(LossKind::PpoActor, stdlibProgram("ppo_actor_loss"), false,
                     b, fb, ls);
}

TEST(FnBuiltins, GrpoLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(22);
  const int64_t N = 8, S = 12;
  TrainBatch b;
  b.seq = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.oldLogprobs = noisyLogprobs(b.seq, gen);
  b.refLogprobs = noisyLogprobs(b.seq, gen);
  b.advantages = at::randn({N}, gen);
  LossSettings ls;
  ls.clip = 0.25;
  ls.kl = 0.05;
  TrainBatch fb;
  fb.fnInputs = {b.seq, b.oldLogprobs, b.advantages, b.refLogprobs};
  fb.fnMasks = {b.lossMask};
  expectSameTraining(LossKind::Grpo, stdlibProgram("grpo_loss"), false, b, fb,
                     ls);
}

TEST(FnBuiltins, PpoValueLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(23);
  const int64_t N = 8, S = 12;
  TrainBatch b;
  b.seq = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.oldValues = 0.3 * at::randn({N, S - 1}, gen);
  b.returns = at::randn({N, S - 1}, gen);
  LossSettings ls;
  ls.clip = 0.2;
  TrainBatch fb;
  fb.fnInputs = {b.seq, b.oldValues, b.returns};
  fb.fnMasks = {b.lossMask};
  expectSameTraining(LossKind::PpoValue, stdlibProgram("ppo_value_loss"), true,
                     b, fb, ls);
}

// SFT on whole sequences: the built-in's mask is the non-pad predicted
// tokens, which mask_of takes when the input has no mask.
TEST(FnBuiltins, SftLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(24);
  const int64_t N = 8, S = 12, pad = 3;
  TrainBatch b;
  b.seq = at::randint(1, 6, {N, S}, gen, at::kLong); // many pads
  b.lossMask = (b.seq.narrow(1, 1, S - 1) != pad).to(at::kFloat);
  TrainBatch fb;
  fb.fnInputs = {b.seq};
  expectSameTraining(LossKind::Sft, stdlibProgram("sft_loss"), false, b, fb, {},
                     pad);
}

TEST(FnBuiltins, DpoLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(25);
  const int64_t N = 8, S = 12;
  TrainBatch b;
  b.seq = tokens(N, S, gen);
  b.rejected = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.rejectedMask = generationMask(N, S - 1, gen);
  b.refLogprobs = noisyLogprobs(b.seq, gen);
  b.refRejected = noisyLogprobs(b.rejected, gen);
  LossSettings ls;
  ls.beta = 0.5;
  TrainBatch fb;
  fb.fnInputs = {b.seq, b.rejected, b.refLogprobs, b.refRejected};
  fb.fnMasks = {b.lossMask, b.rejectedMask};
  expectSameTraining(LossKind::Dpo, stdlibProgram("dpo_loss"), false, b, fb,
                     ls);
}

TEST(FnBuiltins, RewardModelLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(26);
  const int64_t N = 8, S = 12;
  TrainBatch b;
  b.seq = tokens(N, S, gen);
  b.rejected = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.rejectedMask = generationMask(N, S - 1, gen);
  TrainBatch fb;
  fb.fnInputs = {b.seq, b.rejected};
  fb.fnMasks = {b.lossMask, b.rejectedMask};
  expectSameTraining(LossKind::Rm, stdlibProgram("rm_loss"), true, b, fb);
}

// A host function is no loss, and a loss checks its batch.
TEST(FnBuiltins, TrainStepChecksTheFnBatch) {
  FnProgram host = FnProgram::parse(
      program("host", {"%0 = input 0 f1", "%1 = neg %0", "out x %1"}));
  FnProgram sft = FnProgram::parse(stdlibProgram("sft_loss"));
  ModelConfig cfg = tiny(false);
  ParamMap p = initParams(cfg, 7);
  for (auto &[n, t] : p)
    t.requires_grad_(true);
  LlamaModel m(cfg, p, {});
  Adam opt(AdamSettings{});
  TrainBatch b;
  b.fnInputs = {at::randint(1, 512, {4, 6}, at::kLong)};
  auto msg = [&](const FnProgram &fn, const TrainBatch &batch) -> std::string {
    TrainOptions o;
    o.lossFn = &fn;
    try {
      trainStep(m, opt, batch, o);
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(msg(host, b), "fn 'f' is a host function, not a loss");
  TrainBatch none;
  EXPECT_EQ(msg(sft, none), "fn 'sft_loss' takes 1 inputs, the batch has 0");
  TrainBatch floats;
  floats.fnInputs = {at::zeros({4, 6})};
  EXPECT_EQ(msg(sft, floats),
            "fn 'sft_loss': line 2: input 0 (tok) must hold token ids, got Float");
  EXPECT_EQ(msg(sft, b), "");
}

//===----------------------------------------------------------------------===//
// The C entry points
//===----------------------------------------------------------------------===//

/// Sets environment variables for the life of the object.
class ScopedEnv {
public:
  void set(const char *name, const char *value) {
    const char *old = std::getenv(name);
    saved.emplace_back(name,
                       old ? std::optional<std::string>(old) : std::nullopt);
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second)
        setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        unsetenv(it->first.c_str());
    }
  }

private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
};

// A one-rank job: rlhf_apply gives rlhf_compute's GAE (values, masks, rows),
// and rlhf_train_fn trains a model exactly as rlhf_train trains its twin
// (two minibatches of two micro-batches, two epochs).
TEST(FnProgramCalls, ApplyAndTrainFnMatchTheBuiltIns) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 ("rlhf-fn-calls-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream data(dir / "prompts.jsonl");
    for (const char *s : {"abc", "hello", "xyz q", "rlhf", "fn code", "gae"})
      data << "{\"prompt\": \"" << s << "\"}\n";
  }
  ScopedEnv env;
  env.set("WORLD_SIZE", nullptr);
  env.set("RANK", nullptr);
  env.set("RLHF_DEVICE", nullptr);
  env.set("RLHF_PRECISION", nullptr);
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "0");
  env.set("RLHF_RENDEZVOUS_FILE", (dir / "port").c_str());
  std::vector<std::string> args = {"fn-test", "--out", (dir / "run").string(),
                                   "--quiet"};
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  optind = 1;
  rlhf_prog *p = rlhf_prog_create(int(argv.size()), argv.data(), "fn_test", 1,
                                  3, 0, 1, 0.0);
  const int64_t arch[] = {2, 64, 4, 2, 176, 512, 64, 0, 0, 0};
  const int64_t lay[] = {0, 1, 1, 1, 2};
  // Models of one architecture start equal; eps as in trainOnce.
  for (const char *name : {"a", "b"})
    rlhf_prog_add_model(p, name, arch, 1, 1e-3, 0.9, 0.95, 1.0, 0.0, 1.0,
                        nullptr, lay);
  rlhf_prog_add_dataset(p, "prompts", (dir / "prompts.jsonl").c_str(), 4, 8, 6,
                        "prompt");
  const int64_t step = rlhf_prog_start(p);
  rlhf_step_begin(p, step);
  rlhf_value *gen =
      rlhf_generate(p, 0, rlhf_field(p, rlhf_load(p, 0, step), "prompt"), lay,
                    6, 2, 1.0, 1.0, 0, "generate");
  rlhf_value *seq = rlhf_field(p, gen, "seq"),
             *lp = rlhf_field(p, gen, "logprobs");
  const int64_t N = seq->rows, T = seq->t.size(1) - 1;
  ASSERT_EQ(N, 8);
  ASSERT_TRUE(lp->mask.defined());
  auto g = at::make_generator<at::CPUGeneratorImpl>(31);
  rlhf_value *score =
      tensorValue(p, at::randn({N}, g), at::Tensor(), N, std::nullopt);
  rlhf_value *values =
      tensorValue(p, at::randn({N, T}, g), at::Tensor(), N, std::nullopt);
  rlhf_value *ref = tensorValue(p, lp->t + 0.1 * at::randn({N, T}, g), lp->mask,
                                N, std::nullopt);
  rlhf_value *builtinIn[] = {score, values, lp, ref};
  rlhf_value *want = rlhf_compute(p, RLHF_COMPUTE_GAE, 4, builtinIn,
                                  "gamma=0.99,lam=0.9,kl=0.05", "gae");
  const std::string gaeCode = stdlibProgram("gae", 3);
  for (int round = 0; round < 2; ++round) { // the second from the cache
    rlhf_value *got = rlhf_apply(p, gaeCode.c_str(), 4, builtinIn, "gae fn");
    ASSERT_TRUE(got->isRecord);
    EXPECT_EQ(got->fields.size(), 2u);
    for (const char *name : {"advantages", "returns"}) {
      rlhf_value *w = rlhf_field(p, want, name), *v = rlhf_field(p, got, name);
      expectClose(v->t, w->t, name);
      EXPECT_EQ(v->rows, N) << name;
      EXPECT_FALSE(v->layout) << name << " is replicated";
      // The mask of the first input that has one: the logprobs'.
      ASSERT_TRUE(v->mask.defined()) << name;
      EXPECT_TRUE(at::equal(v->mask, lp->mask)) << name;
    }
  }
  // A per-sequence output has no mask; a scalar one row.
  rlhf_value *stats =
      rlhf_apply(p,
                 "rlhf.fn 1 stats host\n%0 = input 0 f1\n%1 = batch_mean %0\n"
                 "%2 = neg %0\nout mean %1\nout neg %2",
                 1, &score, "stats");
  rlhf_value *mean = rlhf_field(p, stats, "mean"),
             *neg = rlhf_field(p, stats, "neg");
  EXPECT_FLOAT_EQ(mean->t.item<float>(), score->t.mean().item<float>());
  EXPECT_EQ(mean->rows, 1);
  EXPECT_FALSE(neg->mask.defined());
  EXPECT_TRUE(at::equal(neg->t, -score->t));

  std::map<std::string, at::Tensor> before;
  for (auto &[n, t] : p->models[0].params)
    before[n] = t.detach().clone();
  rlhf_value *adv = rlhf_field(p, want, "advantages");
  rlhf_value *trainIn[] = {seq, lp, adv};
  rlhf_value *la = rlhf_train(p, 0, RLHF_LOSS_PPO_ACTOR, 3, trainIn, lay, 2, 2,
                              "clip=0.2", "train a");
  const std::string ppo = stdlibProgram("ppo_actor_loss");
  rlhf_value *lb = rlhf_train_fn(p, 1, ppo.c_str(), 3, trainIn, lay, 2, 2,
                                 "clip=0.2", "train b");
  expectNear(rlhf_field(p, lb, "loss")->t.item<double>(),
             rlhf_field(p, la, "loss")->t.item<double>(), "loss");
  const ModelState &a = p->models[0], &b = p->models[1];
  EXPECT_EQ(b.trainCalls, 1);
  double moved = 0;
  for (auto &[n, t] : a.params) {
    expectClose(b.params.at(n), t, "after training: " + n);
    moved = std::max(moved, (t - before.at(n)).abs().max().item<double>());
  }
  EXPECT_GT(moved, 1e-6) << "training moved no weight";
  rlhf_step_end(p, step);
  EXPECT_EQ(rlhf_prog_finish(p), 0);
  fs::remove_all(dir);
}

} // namespace
