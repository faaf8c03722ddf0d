//===- FnBuiltinsTest.cpp - the stdlib's functions equal the built-ins ----===//
//
// The stdlib's advantage estimators and losses (stdlib/algorithms/
// estimators.rlhf, losses.rlhf), compiled by rlhfc into Inputs/stdlib.fn,
// against the C++ built-ins they replaced (BuiltinOracle.h): the same
// values on random inputs, and the same loss, gradients and updates of a
// tiny model, within 1e-6; and the C entry points rlhf_apply and
// rlhf_train.
//
//===----------------------------------------------------------------------===//

#include "BuiltinOracle.h"
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
    // Row 0 with holes, as tool output inside a response leaves them.
    mask[0].zero_();
    for (int64_t t : {1, 3, 4, 7})
      mask[0][t] = 1;
    oracle::GaeResult want =
        oracle::gae(score, values, lp, ref, mask, gamma, lam, kl);
    auto got = run(stdlibProgram("gae", k++), {score, values, lp, ref},
                   {{}, {}, mask});
    std::string what = "gamma " + std::to_string(gamma) + " lam " +
                       std::to_string(lam) + " kl " + std::to_string(kl);
    expectClose(got[0], want.advantages, "advantages, " + what);
    expectClose(got[1], want.returns, "returns, " + what);
    // The metric `kl`: the built-in's mean of logprobs - ref over the mask.
    expectNear(got[2].item<double>(),
               ((lp - ref) * mask).sum().item<double>() /
                   mask.sum().item<double>(),
               "kl, " + what, 1e-5);
  }
}

TEST(FnBuiltins, GroupEstimatorsMatch) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(12);
  at::Tensor score = at::randn({12}, gen), base = at::randn({12}, gen);
  for (int64_t G : {2, 3, 4}) { // stdlib-calls.rlhf's groups, in order
    int k = int(G - 2);
    expectClose(run1(stdlibProgram("grpo_adv", k), {score}),
                oracle::grpoAdvantages(score, G),
                "grpo, group " + std::to_string(G));
    expectClose(run1(stdlibProgram("rloo_adv", k), {score}),
                oracle::rlooAdvantages(score, G),
                "rloo, group " + std::to_string(G));
  }
  expectClose(run1(stdlibProgram("remax_adv"), {score, base}),
              oracle::remaxAdvantages(score, base), "remax");
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
        oracle::klPenalty(score, lp, ref, mask, coef),
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

/// A fresh tiny model and its optimizer. Adam's first steps move each
/// weight by about lr * g / (|g| + eps): with the usual eps, a gradient near
/// eps turns a rounding difference into a large change of the update. A
/// large eps keeps the update proportional to the gradient, so that the
/// second minibatch's gradients compare too.
struct Fresh {
  explicit Fresh(bool valueHead) : cfg(tiny(valueHead)), opt(settings()) {
    ParamMap p = initParams(cfg, 7);
    for (auto &[n, t] : p)
      t.requires_grad_(true);
    model.emplace(cfg, p, TensorParallel{});
  }
  static AdamSettings settings() {
    AdamSettings as;
    as.lr = 1e-3;
    as.eps = 1.0;
    return as;
  }
  Trained result(TrainStats stats) {
    Trained r;
    r.stats = stats;
    for (auto &[n, t] : model->params()) {
      r.params[n] = t.detach().clone();
      r.grads[n] = t.grad().defined() ? t.grad().clone() : at::Tensor();
    }
    return r;
  }
  ModelConfig cfg;
  Adam opt;
  std::optional<LlamaModel> model;
};

/// The oracle's loss `builtin` and the fn code `code` train alike: one
/// step per split of the batch (1 or 2 minibatches of 1 or 2 micro-batches
/// for trainStep), with the loss, the gradient norm, every gradient and
/// every updated parameter within `rel` relative. trainStep's log-probs come
/// from the fused lm head, the oracle's from log_softmax over whole logits:
/// the same math summed in another order, a few fp32 ulps apart.
void expectSameTraining(oracle::Loss builtin, const std::string &code,
                        bool valueHead, const oracle::Batch &b,
                        const TrainBatch &fnBatch,
                        oracle::LossSettings settings = {}, int64_t pad = 0,
                        double rel = 1e-5) {
  FnProgram fn = FnProgram::parse(code);
  for (auto [minibatches, micro] :
       {std::pair<int64_t, int64_t>{1, 1}, {2, 1}, {1, 2}, {2, 2}}) {
    Fresh w(valueHead), g(valueHead);
    Trained want = w.result(
        oracle::train(*w.model, w.opt, builtin, b, settings, minibatches));
    TrainOptions of;
    of.loss = &fn;
    of.pad = pad;
    of.minibatches = minibatches;
    of.microBatches = micro;
    of.keepGradients = true; // compared below
    Trained got = g.result(trainStep(*g.model, g.opt, fnBatch, of));
    std::string what = fn.name() + ", " + std::to_string(minibatches) +
                       " minibatches of " + std::to_string(micro) +
                       " micro-batches";
    expectNear(got.stats.loss, want.stats.loss, what + ": loss", rel);
    expectNear(got.stats.gradNorm, want.stats.gradNorm, what + ": grad norm",
               rel);
    ASSERT_GT(want.stats.gradNorm, 0) << what;
    expectNear(got.stats.gradNormMean, want.stats.gradNormMean,
               what + ": mean grad norm", rel);
    for (auto &[n, gr] : want.grads) {
      ASSERT_TRUE(gr.defined()) << what << ": " << n;
      expectClose(got.grads.at(n), gr, what + ": grad of " + n, rel);
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
  oracle::Batch b;
  b.seq = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.oldLogprobs = noisyLogprobs(b.seq, gen);
  b.advantages = at::randn({N, S - 1}, gen);
  oracle::LossSettings ls;
  ls.clip = 0.2;
  TrainBatch fb;
  fb.inputs = {b.seq, b.oldLogprobs, b.advantages};
  fb.masks = {b.lossMask};
  expectSameTraining(oracle::Loss::PpoActor, stdlibProgram("ppo_actor_loss"),
                     false, b, fb, ls);
}

TEST(FnBuiltins, GrpoLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(22);
  const int64_t N = 8, S = 12;
  oracle::Batch b;
  b.seq = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.oldLogprobs = noisyLogprobs(b.seq, gen);
  b.refLogprobs = noisyLogprobs(b.seq, gen);
  b.advantages = at::randn({N}, gen);
  oracle::LossSettings ls;
  ls.clip = 0.25;
  ls.kl = 0.05;
  TrainBatch fb;
  fb.inputs = {b.seq, b.oldLogprobs, b.advantages, b.refLogprobs};
  fb.masks = {b.lossMask};
  expectSameTraining(oracle::Loss::Grpo, stdlibProgram("grpo_loss"), false, b,
                     fb, ls);
}

TEST(FnBuiltins, PpoValueLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(23);
  const int64_t N = 8, S = 12;
  oracle::Batch b;
  b.seq = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.oldValues = 0.3 * at::randn({N, S - 1}, gen);
  b.returns = at::randn({N, S - 1}, gen);
  oracle::LossSettings ls;
  ls.clip = 0.2;
  TrainBatch fb;
  fb.inputs = {b.seq, b.oldValues, b.returns};
  fb.masks = {b.lossMask};
  expectSameTraining(oracle::Loss::PpoValue, stdlibProgram("ppo_value_loss"),
                     true, b, fb, ls);
}

// SFT on whole sequences: the built-in's mask is the non-pad predicted
// tokens, which mask_of takes when the input has no mask.
TEST(FnBuiltins, SftLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(24);
  const int64_t N = 8, S = 12, pad = 3;
  oracle::Batch b;
  b.seq = at::randint(1, 6, {N, S}, gen, at::kLong); // many pads
  b.lossMask = (b.seq.narrow(1, 1, S - 1) != pad).to(at::kFloat);
  TrainBatch fb;
  fb.inputs = {b.seq};
  expectSameTraining(oracle::Loss::Sft, stdlibProgram("sft_loss"), false, b, fb,
                     {}, pad);
}

TEST(FnBuiltins, DpoLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(25);
  const int64_t N = 8, S = 12;
  oracle::Batch b;
  b.seq = tokens(N, S, gen);
  b.rejected = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.rejectedMask = generationMask(N, S - 1, gen);
  b.refLogprobs = noisyLogprobs(b.seq, gen);
  b.refRejected = noisyLogprobs(b.rejected, gen);
  oracle::LossSettings ls;
  ls.beta = 0.5;
  TrainBatch fb;
  fb.inputs = {b.seq, b.rejected, b.refLogprobs, b.refRejected};
  fb.masks = {b.lossMask, b.rejectedMask};
  expectSameTraining(oracle::Loss::Dpo, stdlibProgram("dpo_loss"), false, b, fb,
                     ls);
}

TEST(FnBuiltins, RewardModelLossMatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(26);
  const int64_t N = 8, S = 12;
  oracle::Batch b;
  b.seq = tokens(N, S, gen);
  b.rejected = tokens(N, S, gen);
  b.lossMask = generationMask(N, S - 1, gen);
  b.rejectedMask = generationMask(N, S - 1, gen);
  TrainBatch fb;
  fb.inputs = {b.seq, b.rejected};
  fb.masks = {b.lossMask, b.rejectedMask};
  expectSameTraining(oracle::Loss::Rm, stdlibProgram("rm_loss"), true, b, fb);
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
  b.inputs = {at::randint(1, 512, {4, 6}, at::kLong)};
  auto msg = [&](const FnProgram &fn, const TrainBatch &batch) -> std::string {
    TrainOptions o;
    o.loss = &fn;
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
  floats.inputs = {at::zeros({4, 6})};
  EXPECT_EQ(
      msg(sft, floats),
      "fn 'sft_loss': line 2: input 0 (tok) must hold token ids, got Float");
  EXPECT_EQ(msg(sft, b), "");
}

//===----------------------------------------------------------------------===//
// The C entry points
//===----------------------------------------------------------------------===//

// A one-rank job: rlhf_apply gives the oracle's GAE (values, masks, rows),
// and rlhf_train trains a model exactly as the oracle trains its twin
// (two minibatches of two micro-batches, two epochs).
TEST(FnProgramCalls, ApplyAndTrainFnMatchTheOracle) {
  OneRankJob job("fn-calls", 1, 3);
  const std::filesystem::path &dir = job.dir;
  rlhf_prog *p = job.p;
  {
    std::ofstream data(dir / "prompts.jsonl");
    for (const char *s : {"abc", "hello", "xyz q", "rlhf", "fn code", "gae"})
      data << "{\"prompt\": \"" << s << "\"}\n";
  }
  const int64_t arch[] = {2, 64, 4, 2, 176, 512, 64, 0, 0, 0};
  const int64_t lay[] = {0, 1, 1, 1, 2, 1, 1}; // rlhf_program.h's layout arrays
  // Models of one architecture start equal; eps as in trainOnce.
  for (const char *name : {"a", "b"})
    rlhf_prog_add_model(p, name, arch, 1, 1e-3, 0.9, 0.95, 1.0, 0.0, 1.0,
                        nullptr, lay);
  rlhf_prog_add_dataset(p, "prompts", (dir / "prompts.jsonl").c_str(), 4, 8, 6,
                        "prompt");
  const int64_t step = rlhf_prog_start(p);
  rlhf_step_begin(p, step);
  rlhf_value *gen =
      rlhf_generate(p, 0, rlhf_field(p, rlhf_load(p, 0, step, 4), "prompt"),
                    lay, 6, 2, 1.0, 1.0, 0, "generate");
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
  rlhf_value *gaeIn[] = {score, values, lp, ref};
  oracle::GaeResult want = oracle::gae(score->t, values->t, lp->t, ref->t,
                                       lp->mask, 0.99, 0.9, 0.05);
  const std::string gaeCode = stdlibProgram("gae", 3);
  rlhf_value *got = nullptr;
  for (int round = 0; round < 2; ++round) { // the second from the cache
    got = rlhf_apply(p, gaeCode.c_str(), 4, gaeIn, "gae fn");
    ASSERT_TRUE(got->isRecord);
    EXPECT_EQ(got->fields.size(), 3u);
    // gae's scalar `kl` is a field of one row, and a metric.
    rlhf_value *kl = rlhf_field(p, got, "kl");
    EXPECT_EQ(kl->rows, 1);
    at::Tensor m = lp->mask.to(at::kDouble);
    expectNear(kl->t.item<double>(),
               ((lp->t - ref->t).to(at::kDouble) * m).sum().item<double>() /
                   m.sum().item<double>(),
               "kl", 1e-5);
    for (const char *name : {"advantages", "returns"}) {
      rlhf_value *v = rlhf_field(p, got, name);
      expectClose(
          v->t, std::string(name) == "returns" ? want.returns : want.advantages,
          name);
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

  // rlhf_train trains model b as the oracle trains a copy of it: two
  // epochs of two minibatches (of two micro-batches in the runtime).
  std::map<std::string, at::Tensor> before;
  for (auto &[n, t] : p->models[1].params)
    before[n] = t.detach().clone();
  rlhf_value *adv = rlhf_field(p, got, "advantages");
  rlhf_value *trainIn[] = {seq, lp, adv};
  const std::string ppo = stdlibProgram("ppo_actor_loss");
  rlhf_value *lb =
      rlhf_train(p, 1, ppo.c_str(), 3, trainIn, lay, 2, 2, "", "train b");
  ModelConfig cfg = tiny(false);
  ParamMap copy;
  for (auto &[n, t] : before)
    copy[n] = t.clone().requires_grad_(true);
  LlamaModel twin(cfg, copy, TensorParallel{});
  AdamSettings as;
  as.lr = 1e-3;
  as.beta1 = 0.9;
  as.beta2 = 0.95;
  as.eps = 1.0;
  as.weightDecay = 0.0;
  as.gradClip = 1.0;
  Adam opt(as);
  oracle::Batch ob;
  ob.seq = seq->t;
  ob.lossMask = seq->mask.to(at::kFloat);
  ob.oldLogprobs = lp->t;
  ob.advantages = adv->t;
  double wantLoss = 0;
  for (int epoch = 0; epoch < 2; ++epoch)
    wantLoss +=
        oracle::train(twin, opt, oracle::Loss::PpoActor, ob, {}, 2).loss / 2;
  // Whitened advantages make the loss a small sum of cancelling terms,
  // summed in another order over micro-batches: compare it more loosely
  // than the weights.
  expectNear(rlhf_field(p, lb, "loss")->t.item<double>(), wantLoss, "loss",
             1e-4);
  const ModelState &b = p->models[1];
  EXPECT_EQ(b.trainCalls, 1);
  double moved = 0;
  for (auto &[n, t] : twin.params()) {
    expectClose(b.params.at(n), t, "after training: " + n);
    moved = std::max(moved, (t - before.at(n)).abs().max().item<double>());
  }
  EXPECT_GT(moved, 1e-6) << "training moved no weight";
  rlhf_step_end(p, step);
  EXPECT_EQ(rlhf_prog_finish(p), 0);
}

} // namespace
