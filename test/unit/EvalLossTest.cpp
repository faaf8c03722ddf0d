//===- EvalLossTest.cpp - validation losses, forward only ----------------===//
//
// Held-out evaluation of SFT, DPO and reward-model training runs the train
// call's loss forward (rlhf::evalLoss): it must give the loss the train
// step computes before its update, leave the weights alone, and count only
// the rows of weight 1 (a short last eval batch is padded with rows of
// weight 0).
//
//===----------------------------------------------------------------------===//

#include "FnTestUtil.h"

#include <ATen/CPUGeneratorImpl.h>

using namespace rlhf;
using namespace rlhf::fntest;

namespace {

ModelConfig tinyConfig(bool valueHead) {
  ModelConfig cfg;
  cfg.shape = ModelShape{2, 64, 4, 2, 176, 512, false, valueHead};
  cfg.maxSeq = 64;
  return cfg;
}

LlamaModel tinyModel(bool valueHead) {
  ModelConfig cfg = tinyConfig(valueHead);
  ParamMap p = initParams(cfg, 7);
  for (auto &[n, t] : p)
    t.requires_grad_(true);
  return LlamaModel(cfg, p, TensorParallel{});
}

/// Token ids in [1, 512), rows of random length (pads at the end).
at::Tensor tokens(int64_t N, int64_t S, at::Generator &gen) {
  at::Tensor seq = at::randint(1, 512, {N, S}, gen, at::kLong);
  at::Tensor len = at::randint(3, S + 1, {N, 1}, gen, at::kLong);
  return seq * (at::arange(S, at::kLong).unsqueeze(0) < len);
}

/// The batch of stdlib loss `name`: sft_loss, dpo_loss or rm_loss.
TrainBatch batchOf(const std::string &name, int64_t N, int64_t S,
                   at::Generator &gen) {
  TrainBatch b;
  at::Tensor chosen = tokens(N, S, gen);
  if (name == "sft_loss") {
    b.inputs = {chosen};
    return b;
  }
  at::Tensor rejected = tokens(N, S, gen);
  b.inputs = {chosen, rejected};
  if (name == "dpo_loss")
    for (int k = 0; k < 2; ++k)
      b.inputs.push_back(-at::rand({N, S - 1}, gen) * 7);
  return b;
}

TrainBatch firstRows(const TrainBatch &b, int64_t n) {
  TrainBatch r = b;
  for (at::Tensor &t : r.inputs)
    t = t.narrow(0, 0, n);
  return r;
}

/// A stdlib loss on a random batch of 8 rows of 12 tokens.
struct Case {
  Case(const char *loss, bool valueHead, uint64_t seed)
      : loss(loss), valueHead(valueHead),
        fn(FnProgram::parse(stdlibProgram(loss))) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    batch = batchOf(loss, 8, 12, gen);
  }
  const char *loss;
  bool valueHead;
  FnProgram fn;
  TrainBatch batch;
};

std::vector<Case> cases(uint64_t seed) {
  return {{"sft_loss", false, seed},
          {"dpo_loss", false, seed},
          {"rm_loss", true, seed}};
}

} // namespace

// The loss a train step reports is its minibatch's loss before the update:
// evalLoss gives it, in any number of micro-batches, and changes nothing.
TEST(EvalLoss, IsTheTrainStepsLossAndLeavesTheWeights) {
  for (const Case &c : cases(31)) {
    const FnProgram &fn = c.fn;
    const TrainBatch &b = c.batch;
    LlamaModel trained = tinyModel(c.valueHead);
    Adam opt(AdamSettings{});
    TrainOptions to;
    to.loss = &fn;
    const double want = trainStep(trained, opt, b, to).loss;
    for (int64_t micro : {1, 3, 8}) {
      LlamaModel m = tinyModel(c.valueHead);
      std::map<std::string, at::Tensor> before;
      for (auto &[n, t] : m.params())
        before[n] = t.detach().clone();
      TrainOptions o;
      o.loss = &fn;
      o.microBatches = micro;
      TrainStats got = evalLoss(m, b, o);
      const std::string what =
          std::string(c.loss) + ", " + std::to_string(micro) + " micro-batches";
      expectNear(got.loss, want, what, 1e-5);
      for (auto &[n, t] : m.params()) {
        EXPECT_TRUE(at::equal(t.detach(), before[n])) << what << ": " << n;
        EXPECT_FALSE(t.grad().defined()) << what << ": " << n;
      }
    }
  }
}

// Rows of weight 0 count for nothing, in batch means and in token means'
// denominators alike: the loss of 5 real rows padded to 8 with other rows
// is the loss of the 5 alone, and not that of all 8.
TEST(EvalLoss, RowsOfWeightZeroDoNotCount) {
  for (Case &c : cases(32)) {
    const FnProgram &fn = c.fn;
    TrainBatch &b = c.batch;
    LlamaModel m = tinyModel(c.valueHead);
    TrainOptions o;
    o.loss = &fn;
    o.microBatches = 2;
    const double all = evalLoss(m, b, o).loss;
    const double five = evalLoss(m, firstRows(b, 5), o).loss;
    b.rowWeights = (at::arange(8) < 5).to(at::kFloat);
    const double padded = evalLoss(m, b, o).loss;
    expectNear(padded, five, c.loss, 1e-5);
    EXPECT_GT(std::abs(all - five), 1e-4 * std::abs(five))
        << c.loss << ": the padding rows would not have changed the loss";
    b.rowWeights = at::ones({7});
    EXPECT_THROW(evalLoss(m, b, o), Error) << c.loss << ": 7 weights, 8 rows";
  }
}

// Several weightings from one forward pass (evaluation per data_source):
// each is the loss of its rows alone, as a pass of its own gives it.
TEST(EvalLoss, SeveralWeightingsFromOnePass) {
  for (Case &c : cases(33)) {
    LlamaModel m = tinyModel(c.valueHead);
    TrainOptions o;
    o.loss = &c.fn;
    o.microBatches = 3;
    at::Tensor head = (at::arange(8) < 5).to(at::kFloat);
    std::vector<TrainStats> got =
        evalLosses(m, c.batch, o, {at::Tensor(), head, 1 - head});
    ASSERT_EQ(got.size(), 3u) << c.loss;
    expectNear(got[0].loss, evalLoss(m, c.batch, o).loss, c.loss, 1e-6);
    expectNear(got[1].loss, evalLoss(m, firstRows(c.batch, 5), o).loss,
               std::string(c.loss) + ", first 5 rows", 1e-5);
    TrainBatch b = c.batch;
    b.rowWeights = 1 - head;
    expectNear(got[2].loss, evalLoss(m, b, o).loss,
               std::string(c.loss) + ", last 3 rows", 1e-6);
    EXPECT_GT(std::abs(got[1].loss - got[2].loss), 1e-4) << c.loss;
  }
}
