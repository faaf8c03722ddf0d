//===- MixedPrecisionTest.cpp - bf16 weights, fp32 master weights ---------===//
//
// Megatron's mixed precision on the CPU: bf16 weights and activations, fp32
// logits and losses, and Adam updating fp32 master weights that the bf16
// weights are cast from.
//
//===----------------------------------------------------------------------===//

#include "StdlibFns.h"

#include "rlhf/runtime/Model.h"
#include "rlhf/runtime/Realloc.h"
#include "rlhf/runtime/Train.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

using namespace rlhf;

namespace {

ModelConfig tiny() {
  ModelConfig cfg;
  cfg.shape = ModelShape{2, 64, 4, 2, 176, 512, false, false};
  cfg.maxSeq = 64;
  return cfg;
}

ParamMap asBf16(const ParamMap &full) {
  return toDevice(full, c10::kCPU, at::kBFloat16);
}

ParamMap trainable(ParamMap ps) {
  for (auto &[n, t] : ps)
    t = t.clone().requires_grad_(true);
  return ps;
}

TrainBatch sftBatch(int64_t rows) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(17);
  TrainBatch b;
  b.inputs = {at::randint(0, 512, {rows, 10}, gen, at::kLong)};
  b.masks = {at::ones({rows, 9}, at::kFloat)};
  return b;
}

// The bf16 model computes in bf16 but hands out fp32 logits, close to the
// fp32 model's within bf16's precision.
TEST(MixedPrecision, Bf16LogitsAreFp32AndCloseToFp32) {
  ModelConfig cfg = tiny();
  ParamMap full = initParams(cfg, 5);
  LlamaModel m32(cfg, full, {}), m16(cfg, asBf16(full), {});
  EXPECT_EQ(m16.dtype(), at::kBFloat16);
  at::Tensor tokens = at::randint(0, 512, {2, 12}, at::kLong);
  at::Tensor a = m32.forward(tokens), b = m16.forward(tokens);
  EXPECT_EQ(b.scalar_type(), at::kFloat);
  double scale = a.abs().max().item<double>();
  double diff = (a - b).abs().max().item<double>();
  EXPECT_GT(diff, 0.0) << "bf16 compute gave fp32's exact logits: not bf16";
  EXPECT_LT(diff, 0.05 * scale) << "scale " << scale;
}

// Adam keeps fp32 master weights for bf16 ones: after a step each bf16
// weight is exactly its master cast to bf16, and the masters follow the
// fp32 model's update closely (the update is computed in fp32).
TEST(MixedPrecision, AdamUpdatesFp32MasterWeights) {
  ModelConfig cfg = tiny();
  ParamMap full = initParams(cfg, 5);
  LlamaModel m32(cfg, trainable(full), {}),
      m16(cfg, trainable(asBf16(full)), {});
  AdamSettings as;
  as.lr = 1e-3;
  Adam o32(as), o16(as);
  FnProgram sft = testfns::stdlibFn("sft_loss");
  TrainOptions to;
  to.loss = &sft;
  to.microBatches = 2;
  TrainBatch b = sftBatch(4);
  for (int step = 0; step < 3; ++step) {
    trainStep(m32, o32, b, to);
    trainStep(m16, o16, b, to);
  }
  ASSERT_EQ(o16.masterWeights().size(), m16.params().size());
  EXPECT_TRUE(o32.masterWeights().empty())
      << "fp32 weights need no master copy";
  double worst = 0;
  for (auto &[n, w] : m16.params()) {
    const at::Tensor &master = o16.masterWeights().at(n);
    EXPECT_EQ(master.scalar_type(), at::kFloat) << n;
    EXPECT_EQ(w.scalar_type(), at::kBFloat16) << n;
    EXPECT_TRUE(at::equal(w.detach(), master.to(at::kBFloat16))) << n;
    EXPECT_EQ(o16.moments1().at(n).scalar_type(), at::kFloat) << n;
    // Three steps of lr 1e-3 move a weight by up to ~3e-3. The fp32 and bf16
    // runs start from weights up to 2^-9 relative apart and see slightly
    // different gradients; on average their masters stay far closer.
    const at::Tensor &ref = m32.params().at(n);
    worst =
        std::max(worst, (master - ref.detach()).abs().mean().item<double>());
  }
  EXPECT_LT(worst, 5e-4);
}

// bf16 gradients accumulate over micro-batches in fp32 (the first copied
// in, the rest added): two micro-batches update the masters as one whole
// batch does, up to bf16 rounding of each part, where a step on half the
// batch does not.
TEST(MixedPrecision, Bf16MicroBatchesAccumulate) {
  ModelConfig cfg = tiny();
  const ParamMap init = asBf16(initParams(cfg, 5));
  FnProgram sft = testfns::stdlibFn("sft_loss");
  AdamSettings as;
  as.lr = 1e-3;
  auto masters = [&](int64_t micro, const TrainBatch &b) {
    LlamaModel m(cfg, trainable(init), {});
    Adam o(as);
    TrainOptions to;
    to.loss = &sft;
    to.microBatches = micro;
    for (int step = 0; step < 2; ++step)
      trainStep(m, o, b, to);
    return o.masterWeights();
  };
  const TrainBatch whole = sftBatch(4);
  TrainBatch half = whole;
  half.inputs[0] = whole.inputs[0].narrow(0, 0, 2);
  half.masks[0] = whole.masks[0].narrow(0, 0, 2);
  auto one = masters(1, whole), two = masters(2, whole),
       part = masters(1, half);
  double split = 0, dropped = 0;
  int64_t n = 0;
  for (auto &[name, w] : one) {
    split += (two.at(name) - w).abs().sum().item<double>();
    dropped += (part.at(name) - w).abs().sum().item<double>();
    n += w.numel();
  }
  split /= double(n);
  dropped /= double(n);
  EXPECT_LT(split, 0.1 * dropped)
      << "mean |diff| " << split << " split, " << dropped << " half batch";
}

// A few SFT steps in bf16 lower the loss, as in fp32.
TEST(MixedPrecision, Bf16Trains) {
  ModelConfig cfg = tiny();
  LlamaModel m(cfg, trainable(asBf16(initParams(cfg, 5))), {});
  AdamSettings as;
  as.lr = 3e-3;
  Adam o(as);
  FnProgram sft = testfns::stdlibFn("sft_loss");
  TrainOptions to;
  to.loss = &sft;
  TrainBatch b = sftBatch(4);
  double first = trainStep(m, o, b, to).loss, last = first;
  for (int i = 0; i < 10; ++i)
    last = trainStep(m, o, b, to).loss;
  EXPECT_LT(last, first - 0.5) << "first " << first << ", last " << last;
}

// Gradients of bf16 weights accumulate in fp32 accumulators that live for
// the train call only: no bf16 gradient is left on a weight, which is what
// lets a call hold the 4 + 12 bytes per parameter the plans count besides
// the weights. Outside a train call, backward fills .grad as usual.
TEST(MixedPrecision, Bf16GradientsLiveOnlyInTheTrainCall) {
  ModelConfig cfg = tiny();
  LlamaModel m(cfg, trainable(asBf16(initParams(cfg, 5))), {});
  AdamSettings as;
  Adam o(as);
  FnProgram sft = testfns::stdlibFn("sft_loss");
  TrainOptions to;
  to.loss = &sft;
  to.microBatches = 2;
  TrainBatch b = sftBatch(4);
  trainStep(m, o, b, to);
  int64_t params = 0, stateBytes = 0;
  for (auto &[n, w] : m.params()) {
    EXPECT_FALSE(w.grad().defined()) << n << " kept a bf16 gradient";
    params += w.numel();
    for (auto *state : {&o.masterWeights(), &o.moments1(), &o.moments2()})
      stateBytes += state->at(n).numel() * int64_t(state->at(n).element_size());
  }
  EXPECT_EQ(stateBytes, 12 * params) << "fp32 masters, m and v";
  m.forward(b.inputs[0]).sum().backward();
  for (auto &[n, w] : m.params())
    EXPECT_TRUE(w.grad().defined()) << n << ": a train call's hook stayed";
}

// fp32 weights accumulate in their own .grad, which the call frees at its
// end too (unless asked to keep it), whatever a backward before it left.
TEST(MixedPrecision, Fp32GradientsLiveOnlyInTheTrainCall) {
  ModelConfig cfg = tiny();
  LlamaModel m(cfg, trainable(initParams(cfg, 5)), {});
  Adam o{AdamSettings{}};
  FnProgram sft = testfns::stdlibFn("sft_loss");
  TrainOptions to;
  to.loss = &sft;
  TrainBatch b = sftBatch(4);
  m.forward(b.inputs[0]).sum().backward();
  trainStep(m, o, b, to);
  for (auto &[n, w] : m.params())
    EXPECT_FALSE(w.grad().defined()) << n << " kept its gradient";
  to.keepGradients = true;
  trainStep(m, o, b, to);
  for (auto &[n, w] : m.params())
    EXPECT_TRUE(w.grad().defined()) << n << ": keepGradients dropped it";
}

} // namespace

// A shard cast or moved to its device is one allocation, every tensor a
// 256-byte aligned view of it (what lets a move map one CUDA IPC segment per
// peer), holding the same values; nothing is copied when nothing moves,
// unless asked.
TEST(ShardStorage, CastShardIsOneAlignedBlock) {
  ModelConfig cfg = tiny();
  ParamMap fp32 = initParams(cfg, 3);
  ParamMap bf16 = toDevice(fp32, c10::Device(c10::kCPU), at::kBFloat16);
  ASSERT_EQ(bf16.size(), fp32.size());
  const void *base = bf16.begin()->second.storage().data();
  for (const auto &[n, t] : bf16) {
    EXPECT_EQ(t.storage().data(), base) << n;
    EXPECT_EQ(t.scalar_type(), at::kBFloat16) << n;
    EXPECT_TRUE(t.is_contiguous()) << n;
    // From the block's start (the CPU's allocator aligns it to 64 only).
    EXPECT_EQ(t.storage_offset() * t.element_size() % 256, 0) << n;
    EXPECT_TRUE(at::equal(t, fp32.at(n).to(at::kBFloat16))) << n;
  }
  ParamMap same = toDevice(bf16, c10::Device(c10::kCPU));
  for (const auto &[n, t] : same)
    EXPECT_TRUE(t.is_same(bf16.at(n))) << n;
  ParamMap copied = toDevice(bf16, c10::Device(c10::kCPU), std::nullopt, true);
  for (const auto &[n, t] : copied) {
    EXPECT_NE(t.storage().data(), base) << n;
    EXPECT_TRUE(at::equal(t, bf16.at(n))) << n;
  }
}

// A layout's shard of the full model is one block too.
TEST(ShardStorage, LayoutShardIsOneBlock) {
  ModelConfig cfg = tiny();
  ParamMap full = initParams(cfg, 3);
  ParamMap shard = layoutShard(cfg, full, Layout{0, 1, 2, 1}, 1);
  ASSERT_FALSE(shard.empty());
  const void *base = shard.begin()->second.storage().data();
  for (const auto &[n, t] : shard)
    EXPECT_EQ(t.storage().data(), base) << n;
  const at::Tensor &q = shard.at("model.layers.0.self_attn.q_proj.weight");
  const at::Tensor &qFull = full.at("model.layers.0.self_attn.q_proj.weight");
  EXPECT_TRUE(
      at::equal(q, qFull.narrow(0, qFull.size(0) / 2, qFull.size(0) / 2)));
}

// Outside autograd a shard's q, k, v (and gate, up) lie back to back in its
// block and run as one GEMM each: the logits are those of the separately
// allocated weights, with gradients on (separate GEMMs) and off.
TEST(ShardStorage, StackedProjectionsGiveTheSameLogits) {
  ModelConfig cfg = tiny();
  ParamMap full = initParams(cfg, 5);
  ParamMap block = layoutShard(cfg, full, Layout{0, 1, 1, 1}, 0);
  const std::string a = "model.layers.0.self_attn.";
  const at::Tensor &q = block.at(a + "q_proj.weight"),
                   &k = block.at(a + "k_proj.weight"),
                   &v = block.at(a + "v_proj.weight");
  EXPECT_EQ(k.storage_offset(), q.storage_offset() + q.numel());
  EXPECT_EQ(v.storage_offset(), k.storage_offset() + k.numel());
  // toDevice keeps the block's order.
  ParamMap cast = toDevice(block, c10::Device(c10::kCPU), at::kBFloat16);
  EXPECT_EQ(cast.at(a + "k_proj.weight").storage_offset(),
            cast.at(a + "q_proj.weight").storage_offset() + q.numel());
  LlamaModel separate(cfg, full, {}), stacked(cfg, block, {});
  at::Tensor tokens = at::randint(0, 512, {2, 12}, at::kLong);
  at::Tensor want = separate.forward(tokens);
  at::Tensor withGrad = stacked.forward(tokens);
  at::Tensor noGrad;
  {
    at::NoGradGuard off;
    noGrad = stacked.forward(tokens);
  }
  EXPECT_TRUE(at::allclose(withGrad, want, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(noGrad, want, 1e-4, 1e-4))
      << (noGrad - want).abs().max().item<double>();
}
