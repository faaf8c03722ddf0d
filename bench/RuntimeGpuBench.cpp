//===- RuntimeGpuBench.cpp - our runtime's speed on one GPU ---------------===//
//
// The points of scripts/measure-llama-h100.py (PyTorch at its best, in
// docs/validation/measured-h100.csv), measured through rlhfc's own runtime:
// LlamaModel::generate, a forward pass with token log-probs, and trainStep
// (SFT loss, Adam on fp32 master weights), in bf16 on one GPU with random
// weights. Each point prints its tokens/s, the PyTorch row it mirrors, and
// the CUDA caching allocator's peak. Rows go to DIR/runtime-h100.csv in
// measured-h100.csv's columns, for rlhf-cost-validate to set beside the
// cost model.
//
//   rlhf-bench-gpu-runtime --out DIR            on a GPU (exits 77 without)
//   rlhf-bench-gpu-runtime --out DIR --smoke    tiny shapes, CPU or GPU
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Device.h"
#include "rlhf/runtime/Model.h"
#include "rlhf/runtime/Train.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace rlhf;

namespace {

struct Shape {
  const char *name;
  ModelShape shape;
};

// layers, hidden, heads, kv heads, ffn, vocab (as the PyTorch script).
const Shape kLlama7b{"llama2_7b",
                     {32, 4096, 32, 32, 11008, 32000, false, false}};
const Shape kTiny1b{"tinyllama_1p1b",
                    {22, 2048, 32, 4, 5632, 32000, false, false}};
const Shape k7bL4{"llama2_7b_l4",
                  {4, 4096, 32, 32, 11008, 32000, false, false}};
const Shape k70bL2{"llama2_70b_l2",
                   {2, 8192, 64, 8, 28672, 32000, false, false}};
const Shape kSmoke{"smoke", {2, 256, 4, 4, 688, 1000, false, false}};

struct Bench {
  c10::Device device = c10::kCPU;
  std::ofstream csv;
  int rows = 0;

  void sync() const {
    if (device.is_cuda())
      c10::impl::getDeviceGuardImpl(c10::kCUDA)
          ->synchronizeDevice(device.index());
  }
  void resetPeak() const {
    if (device.is_cuda())
      c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
  }
  /// Mean seconds of `reps` runs of `f` after one warm-up run.
  template <typename F> double time(int reps, F &&f) {
    f();
    sync();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i)
      f();
    sync();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
               .count() /
           reps;
  }

  LlamaModel model(const Shape &s, int64_t maxSeq, bool train) {
    ModelConfig cfg;
    cfg.shape = s.shape;
    cfg.maxSeq = maxSeq;
    ParamMap ps = toDevice(initParams(cfg, 1), device, at::kBFloat16);
    if (train)
      for (auto &[n, t] : ps)
        t.requires_grad_(true);
    return LlamaModel(cfg, std::move(ps), {});
  }

  void row(const char *cat, const Shape &s, int64_t batch, int64_t in,
           int64_t out, double tokensPerSec, const std::string &what) {
    double peak = devicePeakBytes(device) / double(1 << 30);
    std::printf("%-9s %-15s batch %4lld  %5lld+%-4lld  %10.1f tok/s  peak "
                "%6.2f GiB  (%s)\n",
                cat, s.name, (long long)batch, (long long)in, (long long)out,
                tokensPerSec, peak, what.c_str());
    std::fflush(stdout);
    char id[64];
    std::snprintf(id, sizeof(id), "own_runtime_h100_%s_%02d", cat, ++rows);
    csv << id << ',' << cat << ',' << s.name << ",H100_SXM,1,1,1,1," << batch
        << ',' << in << ',' << (out ? std::to_string(out) : "")
        << ",bf16,tokens_per_sec," << tokensPerSec
        << ",tok/s,bench/RuntimeGpuBench.cpp,\"rlhfc runtime; " << what
        << "; allocator peak " << peak << " GiB\"\n";
    csv.flush();
  }

  void decode(const Shape &s, int64_t batch, int64_t prompt, int64_t gen) {
    resetPeak();
    LlamaModel m = model(s, prompt + gen, false);
    std::vector<std::vector<int64_t>> prompts(
        size_t(batch), std::vector<int64_t>(size_t(prompt), 7));
    for (int64_t b = 0; b < batch; ++b)
      prompts[size_t(b)][0] = 1 + b % 100;
    GenerateOptions o;
    o.greedy = true;
    o.maxNewTokens = gen;
    double t = time(1, [&] { m.generate(prompts, o); });
    row("decode", s, batch, prompt, gen, double(batch * gen) / t,
        "generate: prefill + " + std::to_string(gen) + " greedy steps, " +
            std::to_string(t) + " s");
  }

  void inference(const Shape &s, int64_t batch, int64_t seq) {
    resetPeak();
    LlamaModel m = model(s, seq, false);
    at::Tensor tokens = at::randint(0, s.shape.vocab, {batch, seq},
                                    at::TensorOptions().dtype(at::kLong))
                            .to(device);
    at::NoGradGuard ng;
    double t = time(2, [&] { tokenLogprobs(m.forward(tokens), tokens); });
    row("inference", s, batch, seq, 0, double(batch * seq) / t,
        "forward + token log-probs, " + std::to_string(t) + " s");
  }

  void train(const Shape &s, int64_t batch, int64_t seq) {
    resetPeak();
    LlamaModel m = model(s, seq, true);
    Adam opt(AdamSettings{});
    TrainBatch b;
    b.seq = at::randint(0, s.shape.vocab, {batch, seq},
                        at::TensorOptions().dtype(at::kLong));
    b.lossMask = at::ones({batch, seq - 1}, at::kFloat);
    TrainOptions to;
    to.loss = LossKind::Sft;
    double t = time(2, [&] { trainStep(m, opt, b, to); });
    row("train", s, batch, seq, 0, double(batch * seq) / t,
        "trainStep: forward, backward, Adam on fp32 masters, " +
            std::to_string(t) + " s");
  }
};

} // namespace

int main(int argc, char **argv) {
  std::string out;
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--out") && i + 1 < argc)
      out = argv[++i];
    else if (!std::strcmp(argv[i], "--smoke"))
      smoke = true;
    else {
      std::fprintf(stderr,
                   "usage: rlhf-bench-gpu-runtime --out DIR [--smoke]\n");
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: rlhf-bench-gpu-runtime --out DIR [--smoke]\n");
    return 2;
  }
  Bench b;
  if (cudaDeviceCount() > 0)
    b.device = c10::Device(c10::kCUDA, 0);
  else if (!smoke) {
    std::printf("rlhf-bench-gpu-runtime: SKIP: no CUDA device (--smoke runs on "
                "the CPU)\n");
    return 77;
  }
  b.csv.open(out + "/runtime-h100.csv");
  if (!b.csv) {
    std::fprintf(
        stderr,
        "rlhf-bench-gpu-runtime: error: cannot write '%s/runtime-h100.csv'\n",
        out.c_str());
    return 1;
  }
  b.csv << "id,category,model,hardware,gpus,tp,pp,dp,batch,seq_in,seq_out,"
           "dtype,metric,"
           "value,unit,source,notes\n";
  std::printf("rlhfc runtime on %s, bf16, random weights\n",
              b.device.is_cuda() ? "cuda:0" : "the CPU (smoke)");
  if (smoke) {
    b.decode(kSmoke, 2, 8, 4);
    b.inference(kSmoke, 2, 16);
    b.train(kSmoke, 2, 16);
    return 0;
  }
  // The points of docs/validation/measured-h100.csv, PyTorch's rows there.
  for (auto [batch, gen] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 128}, {16, 384}, {64, 128}, {64, 896}, {128, 384}, {256, 128}})
    b.decode(kLlama7b, batch, 128, gen);
  for (auto [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{
           {16, 256}, {64, 256}, {32, 512}, {128, 512}, {16, 1024}})
    b.inference(kLlama7b, batch, seq);
  for (auto [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{
           {16, 512}, {8, 1024}, {4, 2048}})
    b.train(kTiny1b, batch, seq);
  for (auto [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{
           {8, 512}, {8, 1024}, {16, 1024}})
    b.train(k7bL4, batch, seq);
  for (auto [batch, seq] :
       std::vector<std::pair<int64_t, int64_t>>{{4, 1024}, {8, 1024}})
    b.train(k70bL2, batch, seq);
  return 0;
}
