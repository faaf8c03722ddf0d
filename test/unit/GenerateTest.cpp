//===- GenerateTest.cpp - generation with a KV cache ----------------------===//

#include "StdlibFns.h"

#include "rlhf/runtime/Device.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Model.h"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <set>

using namespace rlhf;

namespace {

ModelConfig tiny(bool valueHead = false) {
  ModelConfig cfg;
  cfg.shape = ModelShape{2, 64, 4, 2, 176, 512, false, valueHead};
  cfg.maxSeq = 64;
  return cfg;
}

// Decoding with the cache gives the same tokens and logprobs as re-running
// the whole sequence every step.
TEST(Generate, KvCacheMatchesFullRecompute) {
  ModelConfig cfg = tiny();
  LlamaModel m(cfg, initParams(cfg, 5), {});
  std::vector<std::vector<int64_t>> prompts = {{1, 2, 3, 4}, {9, 8, 7, 6}};
  GenerateOptions o;
  o.greedy = true;
  o.maxNewTokens = 10;
  Generation g = m.generate(prompts, o);
  ASSERT_EQ(g.seq.size(1), 14);
  torch::NoGradGuard ng;
  at::Tensor seq = g.seq.narrow(1, 0, 4).clone();
  for (int step = 0; step < 10; ++step) {
    at::Tensor logits = m.forward(seq).select(1, seq.size(1) - 1);
    at::Tensor next = logits.argmax(-1);
    EXPECT_TRUE(at::equal(next, g.seq.select(1, 4 + step))) << "step " << step;
    at::Tensor lp =
        at::log_softmax(logits, -1).gather(-1, next.unsqueeze(-1)).squeeze(-1);
    EXPECT_TRUE(at::allclose(lp, g.logprobs.select(1, step), 1e-4, 1e-5));
    seq = at::cat({seq, next.unsqueeze(1)}, 1);
  }
}

// Decode steps attend over whole 128-position windows under a key mask (the
// shape CUDA graphs replay): crossing from one window to the next, they still
// match re-running the whole sequence.
TEST(Generate, FixedWindowsMatchFullRecompute) {
  ModelConfig cfg = tiny();
  cfg.maxSeq = 320;
  LlamaModel m(cfg, initParams(cfg, 7), {});
  std::vector<std::vector<int64_t>> prompts(2);
  for (int64_t i = 0; i < 120; ++i) {
    prompts[0].push_back(1 + (i * 7) % 500);
    prompts[1].push_back(1 + (i * 13) % 500);
  }
  GenerateOptions o;
  o.greedy = true;
  o.maxNewTokens = 20; // positions 120..139: windows of 128, then 140
  Generation g = m.generate(prompts, o);
  torch::NoGradGuard ng;
  at::Tensor logits = m.forward(g.seq.narrow(1, 0, 139));
  for (int step = 0; step < 20; ++step) {
    at::Tensor at = logits.select(1, 119 + step);
    EXPECT_TRUE(at::equal(at.argmax(-1), g.seq.select(1, 120 + step)))
        << "step " << step;
    at::Tensor lp = at::log_softmax(at, -1)
                        .gather(-1, g.seq.select(1, 120 + step).unsqueeze(-1))
                        .squeeze(-1);
    EXPECT_TRUE(at::allclose(lp, g.logprobs.select(1, step), 1e-4, 1e-5))
        << "step " << step;
  }
}

// A short prompt, left-padded in a batch, generates what it generates alone.
TEST(Generate, PaddingDoesNotChangeShortPrompts) {
  ModelConfig cfg = tiny();
  LlamaModel m(cfg, initParams(cfg, 5), {});
  GenerateOptions o;
  o.greedy = true;
  o.maxNewTokens = 8;
  Generation batch = m.generate({{5, 6, 7, 8, 9, 10, 11}, {42, 43}}, o);
  Generation alone = m.generate({{42, 43}}, o);
  EXPECT_EQ(batch.promptLen, 7);
  EXPECT_TRUE(
      at::equal(batch.seq[1].narrow(0, 7, 8), alone.seq[0].narrow(0, 2, 8)));
  EXPECT_TRUE(at::allclose(batch.logprobs[1], alone.logprobs[0], 1e-4, 1e-5));
  EXPECT_EQ(batch.mask[1].narrow(0, 0, 5).sum().item<int64_t>(), 0); // pads
}

TEST(Generate, SamplingIsSeededAndTopPNarrows) {
  ModelConfig cfg = tiny();
  LlamaModel m(cfg, initParams(cfg, 5), {});
  GenerateOptions o;
  o.maxNewTokens = 12;
  o.temperature = 1.5;
  o.seed = 99;
  Generation a = m.generate({{1, 2, 3}}, o), b = m.generate({{1, 2, 3}}, o);
  EXPECT_TRUE(at::equal(a.seq, b.seq));
  o.seed = 100;
  Generation c = m.generate({{1, 2, 3}}, o);
  EXPECT_FALSE(at::equal(a.seq, c.seq));
  // top_p so small that only the most likely token survives: greedy.
  o.topP = 1e-9;
  GenerateOptions greedy;
  greedy.greedy = true;
  greedy.maxNewTokens = 12;
  EXPECT_TRUE(at::equal(m.generate({{1, 2, 3}}, o).seq,
                        m.generate({{1, 2, 3}}, greedy).seq));
}

TEST(Generate, StopsAtEos) {
  ModelConfig cfg = tiny();
  LlamaModel m(cfg, initParams(cfg, 5), {});
  GenerateOptions o;
  o.greedy = true;
  o.maxNewTokens = 6;
  Generation free = m.generate({{1, 2, 3}}, o);
  o.eosToken = free.seq[0][3].item<int64_t>(); // the first generated token
  o.padToken = 0;
  Generation g = m.generate({{1, 2, 3}}, o);
  EXPECT_EQ(g.seq[0][3].item<int64_t>(), o.eosToken);
  EXPECT_EQ(g.mask[0].narrow(0, 4, 5).sum().item<int64_t>(), 0);
}

TEST(Generate, RejectsBadRequests) {
  ModelConfig cfg = tiny();
  LlamaModel m(cfg, initParams(cfg, 5), {});
  GenerateOptions o;
  o.maxNewTokens = 100;
  EXPECT_THROW(m.generate({{1, 2}}, o), Error); // exceeds max_seq 64
  EXPECT_THROW(m.generate({{}}, GenerateOptions{}), Error);
  ModelConfig v = tiny(true);
  LlamaModel critic(v, initParams(v, 5), {});
  EXPECT_THROW(critic.generate({{1}}, GenerateOptions{}), Error);
}

} // namespace

#include "rlhf/runtime/Train.h"

namespace {

// With the policy equal to the reference, DPO's margin is 0 and its loss is
// exactly log 2; a reward model scoring identical chosen and rejected
// sequences likewise. A step then moves the loss.
TEST(Losses, PairLossesStartAtLog2AndTrain) {
  for (bool valueHead : {false, true}) {
    ModelConfig cfg = tiny(valueHead);
    ParamMap p = initParams(cfg, 5);
    for (auto &[n, t] : p)
      t.set_requires_grad(true);
    LlamaModel m(cfg, p, {});
    auto gen = at::make_generator<at::CPUGeneratorImpl>(2);
    at::Tensor chosen = at::randint(0, 512, {4, 10}, gen, at::kLong);
    at::Tensor rejected = at::randint(0, 512, {4, 10}, gen, at::kLong);
    FnProgram loss = testfns::stdlibFn(valueHead ? "rm_loss" : "dpo_loss");
    TrainBatch b;
    b.masks = {at::ones({4, 9}), at::ones({4, 9})};
    if (valueHead) {
      b.inputs = {chosen, chosen.clone()}; // identical pairs: margin 0
    } else {
      torch::NoGradGuard ng;
      b.inputs = {chosen, rejected, tokenLogprobs(m.forward(chosen), chosen),
                  tokenLogprobs(m.forward(rejected), rejected)};
    }
    TrainOptions o;
    o.loss = &loss;
    AdamSettings as;
    as.lr = 1e-2;
    Adam opt(as);
    TrainStats first = trainStep(m, opt, b, o);
    EXPECT_NEAR(first.loss, std::log(2.0), 1e-5) << (valueHead ? "rm" : "dpo");
    if (!valueHead) {
      TrainStats second = trainStep(m, opt, b, o);
      EXPECT_LT(second.loss, first.loss - 1e-4)
          << "dpo should improve on its batch";
    }
  }
}

TEST(Losses, TokenLogprobsMatchLogSoftmax) {
  at::Tensor logits = at::randn({2, 5, 7});
  at::Tensor seq = at::randint(0, 7, {2, 5}, at::kLong);
  at::Tensor lp = tokenLogprobs(logits, seq);
  ASSERT_EQ(lp.size(1), 4);
  double want = at::log_softmax(logits[1][2], -1)[seq[1][3].item<int64_t>()]
                    .item<double>();
  EXPECT_NEAR(lp[1][2].item<double>(), want, 1e-6);
}

/// Names of the autograd nodes reachable from `t`.
std::set<std::string> graphNodes(const at::Tensor &t) {
  std::set<std::string> names;
  std::vector<torch::autograd::Node *> todo{t.grad_fn().get()};
  std::set<torch::autograd::Node *> seen;
  while (!todo.empty()) {
    torch::autograd::Node *n = todo.back();
    todo.pop_back();
    if (!n || !seen.insert(n).second)
      continue;
    names.insert(n->name());
    for (const auto &e : n->next_edges())
      todo.push_back(e.function.get());
  }
  return names;
}

// Recomputing layers in backward gives the gradients of the plain pass, and
// the graph then holds one recompute node per layer instead of the layers'
// own operations.
TEST(Train, RecomputeKeepsTheGradients) {
  ModelConfig cfg = tiny();
  ParamMap params = initParams(cfg, 3);
  for (auto &[n, t] : params)
    t.requires_grad_(true);
  LlamaModel m(cfg, params, {});
  at::Tensor tokens = at::randint(0, 512, {3, 12}, at::kLong);
  auto gradients = [&](bool recompute) {
    m.setRecompute(recompute);
    for (auto &[n, t] : m.params())
      if (t.grad().defined())
        t.mutable_grad().zero_();
    at::Tensor out = m.forward(tokens);
    std::set<std::string> nodes = graphNodes(out);
    bool replayed =
        std::any_of(nodes.begin(), nodes.end(), [](const std::string &x) {
          return x.find("RecomputedLayer") != std::string::npos;
        });
    EXPECT_EQ(replayed, recompute);
    tokenLogprobs(out, tokens).sum().backward();
    std::map<std::string, at::Tensor> g;
    for (auto &[n, t] : m.params())
      g[n] = t.grad().clone();
    return g;
  };
  auto plain = gradients(false), replayed = gradients(true);
  ASSERT_EQ(plain.size(), replayed.size());
  for (auto &[n, g] : plain) {
    ASSERT_TRUE(g.defined()) << n;
    EXPECT_TRUE(at::allclose(g, replayed.at(n), 1e-5, 1e-6)) << n;
  }
}

} // namespace

// On a GPU (the gpu.decode-graphs ctest): decode steps replayed as CUDA
// graphs give the eager steps' tokens and log-probabilities, greedy and
// sampled with top-p, across 128-position windows and with padded prompts.
TEST(GenerateCuda, GraphsMatchEagerSteps) {
  if (!torch::cuda::is_available())
    GTEST_SKIP() << "no CUDA device";
  setenv("RLHF_CUDA_GRAPHS", "require", 1);
  ModelConfig cfg = tiny();
  cfg.maxSeq = 320;
  LlamaModel m(
      cfg,
      toDevice(initParams(cfg, 7), c10::Device(c10::kCUDA, 0), at::kBFloat16),
      {});
  std::vector<std::vector<int64_t>> prompts(3);
  for (int64_t i = 0; i < 100; ++i)
    for (size_t r = 0; r < prompts.size(); ++r)
      if (i < 100 - 37 * int64_t(r))
        prompts[r].push_back(1 + (i * (7 + 6 * int64_t(r))) % 500);
  for (bool greedy : {true, false}) {
    GenerateOptions o;
    o.greedy = greedy;
    o.topP = 0.9;
    o.seed = 3;
    o.maxNewTokens = 60; // windows of 128, then 160
    o.cudaGraphs = false;
    Generation eager = m.generate(prompts, o);
    o.cudaGraphs = true;
    Generation graphs = m.generate(prompts, o);
    EXPECT_TRUE(at::equal(eager.seq, graphs.seq)) << "greedy " << greedy;
    EXPECT_TRUE(at::allclose(eager.logprobs, graphs.logprobs, 1e-5, 1e-6))
        << "greedy " << greedy;
  }
  unsetenv("RLHF_CUDA_GRAPHS");
}

// Generations with graphs, one after another, hold no more device memory
// after the second than after the first: each capture's side stream is the
// same, so cuBLAS adds no workspace per call (it keeps one per stream).
TEST(GenerateCuda, RepeatedGenerationsHoldNoMoreMemory) {
  if (!torch::cuda::is_available())
    GTEST_SKIP() << "no CUDA device";
  setenv("RLHF_CUDA_GRAPHS", "require", 1);
  ModelConfig cfg = tiny();
  const c10::Device cuda(c10::kCUDA, 0);
  LlamaModel m(cfg, toDevice(initParams(cfg, 7), cuda, at::kBFloat16), {});
  std::vector<std::vector<int64_t>> prompts(2, std::vector<int64_t>(20, 5));
  GenerateOptions o;
  o.greedy = true;
  o.maxNewTokens = 8;
  o.cudaGraphs = true;
  std::vector<double> held;
  for (int call = 0; call < 4; ++call) {
    m.generate(prompts, o);
    held.push_back(deviceCurrentBytes(cuda));
  }
  for (int call = 2; call < 4; ++call) {
    EXPECT_EQ(held[size_t(call)], held[1]) << "after call " << call + 1;
  }
  unsetenv("RLHF_CUDA_GRAPHS");
}

// On a GPU (the gpu.model-on-cuda ctest): the CUDA kernels (fused RMSNorm,
// attention with grouped KV heads) give the CPU's logits and gradients, in
// fp32 to reduction order and in bf16 within its rounding.
TEST(ModelCuda, LogitsAndGradientsMatchTheCpu) {
  if (!torch::cuda::is_available())
    GTEST_SKIP() << "no CUDA device";
  ModelConfig cfg = tiny();
  const c10::Device cuda(c10::kCUDA, 0);
  at::Tensor tokens = at::randint(0, 512, {3, 24}, at::kLong);
  auto run = [&](c10::Device d, at::ScalarType dtype) {
    ParamMap ps = toDevice(initParams(cfg, 11), d, dtype);
    for (auto &[n, t] : ps)
      t.requires_grad_(true);
    LlamaModel m(cfg, ps, {});
    at::Tensor logits = m.forward(tokens.to(d));
    tokenLogprobs(logits, tokens.to(d)).sum().backward();
    std::map<std::string, at::Tensor> out{
        {"logits", logits.detach().to(at::kCPU, at::kFloat)}};
    for (auto &[n, t] : m.params())
      out[n] = t.grad().to(at::kCPU, at::kFloat);
    return out;
  };
  auto relative = [](const at::Tensor &a, const at::Tensor &b) {
    return (a - b).norm().item<double>() / b.norm().item<double>();
  };
  auto cpu = run(c10::kCPU, at::kFloat);
  auto fp32 = run(cuda, at::kFloat), bf16 = run(cuda, at::kBFloat16);
  for (auto &[n, ref] : cpu) {
    EXPECT_LT(relative(fp32.at(n), ref), 1e-4) << n << " in fp32";
    EXPECT_LT(relative(bf16.at(n), ref), 5e-2) << n << " in bf16";
  }
}

// On the CPU every dtype starts from the same fp32 draw, so a bf16 model is
// the fp32 one cast, whatever layout or precision a test builds.
TEST(InitParams, CpuDrawsFp32ThenCasts) {
  ModelConfig cfg = tiny();
  ParamMap fp32 = initParams(cfg, 3), bf16 = initParams(cfg, 3, at::kBFloat16);
  ASSERT_EQ(bf16.size(), fp32.size());
  for (auto &[n, t] : fp32) {
    EXPECT_EQ(t.scalar_type(), at::kFloat) << n;
    EXPECT_TRUE(at::equal(bf16.at(n), t.to(at::kBFloat16))) << n;
  }
}

// The GPU benchmarks draw their models on the device: the CPU's names and
// shapes, in the dtype asked for, the same numbers for the same seed and
// parameter, N(0, 0.02) with ones for the norms.
TEST(ModelCuda, InitParamsDrawOnTheDevice) {
  if (!torch::cuda::is_available())
    GTEST_SKIP() << "no CUDA device";
  ModelConfig cfg = tiny();
  const auto on =
      at::TensorOptions().device(c10::kCUDA, 0).dtype(at::kBFloat16);
  ParamMap cpu = initParams(cfg, 3), a = initParams(cfg, 3, on),
           b = initParams(cfg, 3, on), other = initParams(cfg, 4, on);
  ASSERT_EQ(a.size(), cpu.size());
  for (auto &[n, ref] : cpu) {
    const at::Tensor &t = a.at(n);
    EXPECT_TRUE(t.is_cuda()) << n;
    EXPECT_EQ(t.scalar_type(), at::kBFloat16) << n;
    EXPECT_EQ(t.sizes(), ref.sizes()) << n;
    EXPECT_TRUE(at::equal(t, b.at(n))) << n << ": one seed, two draws";
    if (n.find("norm") != std::string::npos) {
      EXPECT_TRUE(at::equal(t.to(at::kCPU, at::kFloat), ref)) << n;
      continue;
    }
    EXPECT_FALSE(at::equal(t, other.at(n))) << n << ": another seed";
    if (t.numel() >= 4096) {
      EXPECT_NEAR(t.to(at::kFloat).std().item<double>(), 0.02, 0.002) << n;
    }
  }
  // Reseeded per parameter, not once: two layers' projections differ.
  EXPECT_FALSE(at::equal(a.at("model.layers.0.mlp.gate_proj.weight"),
                         a.at("model.layers.1.mlp.gate_proj.weight")));
}
