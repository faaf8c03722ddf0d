//===- RuntimeGpuBench.cpp - our runtime's speed on one GPU ---------------===//
//
// The points of scripts/measure-llama-h100.py (PyTorch at its best, in
// docs/validation/measured-h100.csv), measured through rlhfc's own runtime:
// LlamaModel::generate, a forward pass with token log-probs, and trainStep
// (SFT loss, Adam on fp32 master weights), in bf16 on one GPU with random
// weights. Each point prints its tokens/s, the PyTorch row it mirrors, and
// the CUDA caching allocator's peak. Rows go to DIR/runtime-TAG.csv in
// measured-h100.csv's columns, for rlhf-cost-validate to set beside the
// cost model.
//
// The rows are priced as the cost model's preset for the GPU the driver
// names (an H100 SXM as H100_SXM and TAG h100, an H200 as H200 and h200;
// --hardware names one): an H200's faster memory must not count as our
// runtime beating an H100's prediction. PyTorch's rows are set beside only
// on the same preset.
//
// A GPU node may lack LLVM, so the cost model's predictions travel as a
// file made beforehand (scripts/gpu-bundle.sh): --list-points writes the
// points, `rlhf-cost-validate POINTS --emit-predictions FILE` predicts them,
// and --predicted FILE sets each row beside its prediction: tokens/s ratio
// and allocator peak against the plan's memory. The last line is
// `runtime/cost-model geomean: X.XX`.
//
//   rlhf-bench-gpu-runtime --out DIR [--predicted F] [--pytorch CSV]...
//                          [--hardware PRESET]  on a GPU (exits 77 without)
//   rlhf-bench-gpu-runtime --out DIR --smoke    tiny shapes, CPU or GPU
//   rlhf-bench-gpu-runtime --out DIR --probe --predicted F
//                          the memory model on a CPU: LLaMA's vocabulary at a
//                          small width, each call's tensor peak against the
//                          plan's (the last line; speed is not compared)
//   rlhf-bench-gpu-runtime --out DIR --cpu-compare [--fp32]
//                          inference, training and generation of cpu_mid on
//                          the CPU, the points `measure-llama-h100.py --cpu`
//                          times (--fp32: in fp32, as its --fp32)
//                          (bench/runtime-vs-pytorch-cpu.py sets them side
//                          by side)
//   rlhf-bench-gpu-runtime --list-points [--smoke|--probe] [--hardware A,B]
//                          the points as CSV rows, once per preset (default
//                          H100_SXM)
//
//===----------------------------------------------------------------------===//

#include "../test/unit/StdlibFns.h"

#include "RuntimeBench.h"

#include "rlhf/runtime/Device.h"
#include "rlhf/runtime/Model.h"
#include "rlhf/runtime/Realloc.h"
#include "rlhf/runtime/Train.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
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
// LLaMA's proportions (and vocabulary) at a width a CPU runs in seconds.
const Shape kProbe{"probe_llama", {2, 128, 2, 2, 344, 32000, false, false}};
// measure-llama-h100.py's cpu_mid: LLaMA-2's vocabulary at width 1024.
const Shape kCpuMid{"cpu_mid", {4, 1024, 16, 16, 2816, 32000, false, false}};
// Grouped-query attention as LLaMA-3 has it: 8 query heads per KV head.
const Shape kProbeGqa{"probe_gqa", {2, 256, 8, 1, 688, 32000, false, false}};

struct Point {
  const char *category; ///< decode, inference or train
  const Shape *shape;
  int64_t batch, in, out; ///< out: new tokens (decode only)
};

/// The points of docs/validation/measured-h100.csv (PyTorch's rows there).
std::vector<Point> points(bool smoke, bool probe, bool cpuCompare = false) {
  if (cpuCompare) // measure-llama-h100.py's CPU_POINTS
    return {
        {"inference", &kCpuMid, 4, 256, 0}, {"inference", &kCpuMid, 8, 512, 0},
        {"train", &kCpuMid, 2, 256, 0},     {"train", &kCpuMid, 4, 512, 0},
        {"decode", &kCpuMid, 1, 128, 32},   {"decode", &kCpuMid, 16, 128, 32}};
  if (smoke)
    return {{"decode", &kSmoke, 2, 8, 4},
            {"inference", &kSmoke, 2, 16, 0},
            {"train", &kSmoke, 2, 16, 0}};
  if (probe)
    return {{"decode", &kProbe, 1, 32, 32},
            {"decode", &kProbe, 16, 64, 64},
            {"decode", &kProbe, 16, 512, 8},
            {"decode", &kProbe, 64, 256, 8},
            {"inference", &kProbe, 4, 128, 0},
            {"inference", &kProbe, 8, 256, 0},
            {"train", &kProbe, 2, 128, 0},
            {"train", &kProbe, 4, 256, 0},
            {"decode", &kProbeGqa, 64, 16, 112},
            {"decode", &kProbeGqa, 16, 512, 8}};
  std::vector<Point> v;
  for (auto [batch, gen] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 128}, {16, 384}, {64, 128}, {64, 896}, {128, 384}, {256, 128}})
    v.push_back({"decode", &kLlama7b, batch, 128, gen});
  for (auto [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{
           {16, 256}, {64, 256}, {32, 512}, {128, 512}, {16, 1024}})
    v.push_back({"inference", &kLlama7b, batch, seq, 0});
  for (auto [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{
           {16, 512}, {8, 1024}, {4, 2048}})
    v.push_back({"train", &kTiny1b, batch, seq, 0});
  for (auto [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{
           {8, 512}, {8, 1024}, {16, 1024}})
    v.push_back({"train", &k7bL4, batch, seq, 0});
  for (auto [batch, seq] :
       std::vector<std::pair<int64_t, int64_t>>{{4, 1024}, {8, 1024}})
    v.push_back({"train", &k70bL2, batch, seq, 0});
  return v;
}

/// The short name of a preset in file names and row ids: h100 for
/// H100_SXM (the names docs/validation has used), h200, a100_80gb.
std::string tagOf(std::string preset) {
  if (preset.size() > 4 && preset.compare(preset.size() - 4, 4, "_SXM") == 0)
    preset.resize(preset.size() - 4);
  for (char &c : preset)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  return preset;
}

/// `items` separated by ", ".
template <typename C> std::string joined(const C &items) {
  std::string s;
  for (const std::string &x : items)
    s += (s.empty() ? "" : ", ") + x;
  return s;
}

/// category, model, batch, tokens in, tokens out
using Key = std::tuple<std::string, std::string, int64_t, int64_t, int64_t>;

/// Comma-separated fields (the files read here quote nothing before the
/// fields used).
std::vector<std::string> fields(const std::string &line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string x; std::getline(ss, x, ',');)
    f.push_back(x);
  return f;
}

int64_t toInt(const std::string &s) { return s.empty() ? 0 : std::stoll(s); }

/// Reference figures by point: tokens/s and (predictions) peak bytes.
struct Reference {
  double value = 0, peakBytes = 0;
};

/// Calls `row` with the fields of every line of the CSV `path` after its
/// header; `what` names the file in the error when it cannot be read.
template <typename F>
void forEachRow(const std::string &path, const std::string &what, F &&row) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("cannot read " + what + "'" + path + "'");
  std::string line;
  std::getline(in, line); // header
  while (std::getline(in, line))
    row(fields(line));
}

/// rlhf-cost-validate --emit-predictions output: the rows of `preset` (a
/// row without a hardware column is any preset's). A file made for other
/// presets only is an error: its figures would price another GPU.
std::map<Key, Reference> readPredictions(const std::string &path,
                                         const std::string &preset) {
  std::map<Key, Reference> out;
  std::set<std::string> others;
  forEachRow(path, "predictions ", [&](const std::vector<std::string> &f) {
    if (f.size() < 9 || f[6] != "tokens_per_sec")
      return;
    if (f.size() >= 10 && f[9] != preset) {
      others.insert(f[9]);
      return;
    }
    out[{f[1], f[2], toInt(f[3]), toInt(f[4]), toInt(f[5])}] = {
        std::stod(f[7]), std::stod(f[8])};
  });
  if (out.empty() && !others.empty())
    throw std::runtime_error("predictions '" + path + "' price " +
                             joined(others) + ", not " + preset +
                             "; make them for it (scripts/gpu-bundle.sh, or "
                             "--list-points --hardware " +
                             preset + ")");
  return out;
}

/// PyTorch's rows of measured-h100.csv on `preset`: the unfused engine's
/// plain points (ids own_<tag>_<category>_NN), not the fused or recomputed
/// variants.
std::map<Key, Reference> readPytorch(const std::string &path,
                                     const std::string &preset) {
  std::map<Key, Reference> out;
  const std::string prefix = "own_" + tagOf(preset) + "_";
  forEachRow(path, "", [&](const std::vector<std::string> &f) {
    if (f.size() >= 14 && f[3] == preset && f[12] == "tokens_per_sec" &&
        f[0] == prefix + f[1] + "_" + f[0].substr(f[0].size() - 2))
      out[{f[1], f[2], toInt(f[8]), toInt(f[9]), toInt(f[10])}] = {
          std::stod(f[13]), 0};
  });
  return out;
}

/// The start of a point's row: category, model, batch and lengths.
void label(const char *cat, const Shape &s, int64_t batch, int64_t in,
           int64_t out) {
  std::printf("%-9s %-15s batch %4lld  %5lld+%-4lld  ", cat, s.name,
              (long long)batch, (long long)in, (long long)out);
}

struct Bench {
  c10::Device device = c10::kCPU;
  std::ofstream csv;
  int rows = 0;
  std::map<Key, Reference> predicted, pytorch;
  std::vector<double> speedRatios;
  int memoryRows = 0, memoryWithin = 0;
  bool probe = false;
  at::ScalarType dtype = at::kBFloat16; ///< --fp32: at::kFloat
  std::string preset = "H100_SXM";      ///< the rows' hardware column

  void sync() const { bench::synchronize(device); }
  void resetPeak() const { resetPeakBytes(device); }
  /// Mean seconds of `reps` runs of `f`, after one warm-up run unless
  /// `warm` says that earlier work has loaded the kernels and filled the
  /// allocator's cache.
  template <typename F> double time(int reps, F &&f, bool warm = false) {
    // The memory probe reads peaks, not speed: one timed run. Generate and
    // inference peak in their first run, so the probe skips their warm-up;
    // a train step peaks in its second (Adam's state is made in the first).
    if (probe)
      reps = 1;
    if (!warm)
      f();
    return bench::meanSeconds(device, reps, f);
  }

  LlamaModel model(const Shape &s, int64_t maxSeq, bool train) {
    ModelConfig cfg;
    cfg.shape = s.shape;
    cfg.maxSeq = maxSeq;
    // In one block, as a rank holds its shard (flatShard): what lets a
    // layer's q, k, v run as one GEMM outside autograd.
    ParamMap ps = layoutShard(
        cfg,
        initParams(cfg, 1, at::TensorOptions().device(device).dtype(dtype)),
        Layout{0, 1, 1, 1}, 0);
    if (train)
      for (auto &[n, t] : ps)
        t.requires_grad_(true);
    return LlamaModel(cfg, std::move(ps), {});
  }

  void row(const char *cat, const Shape &s, int64_t batch, int64_t in,
           int64_t out, double tokensPerSec, const std::string &what) {
    double peakBytes = double(devicePeakBytes(device));
    double peak = peakBytes / double(1 << 30);
    label(cat, s, batch, in, out);
    std::printf("%10.1f tok/s  peak %6.2f GiB", tokensPerSec, peak);
    Key k{cat, s.name, batch, in, out};
    if (auto it = predicted.find(k); it != predicted.end()) {
      double r = tokensPerSec / it->second.value;
      if (device.is_cuda() || !probe) { // the model prices a GPU's speed
        speedRatios.push_back(r);
        std::printf("  | model %10.1f tok/s  runtime/model %5.2f",
                    it->second.value, r);
      }
      if (it->second.peakBytes > 0 && peakBytes > 0) {
        double m = peakBytes / it->second.peakBytes;
        ++memoryRows;
        memoryWithin += std::fabs(m - 1) <= 0.15;
        std::printf("  peak/plan %5.2f", m);
      }
    }
    if (auto it = pytorch.find(k); it != pytorch.end())
      std::printf("  | PyTorch %10.1f tok/s  runtime/PyTorch %5.2f",
                  it->second.value, tokensPerSec / it->second.value);
    std::printf("  (%s)\n", what.c_str());
    std::fflush(stdout);
    char id[64];
    std::snprintf(id, sizeof(id), "own_runtime_%s_%s_%02d",
                  tagOf(preset).c_str(), cat, ++rows);
    csv << id << ',' << cat << ',' << s.name << ',' << preset << ",1,1,1,1,"
        << batch << ',' << in << ',' << (out ? std::to_string(out) : "")
        << (dtype == at::kFloat ? ",fp32" : ",bf16") << ",tokens_per_sec,"
        << tokensPerSec << ",tok/s,bench/RuntimeGpuBench.cpp,\"rlhfc runtime; "
        << what << "; allocator peak " << peak << " GiB\"\n";
    csv.flush();
  }

  void decode(const Shape &s, int64_t batch, int64_t prompt, int64_t gen) {
    LlamaModel m = model(s, prompt + gen, false);
    resetPeak(); // after the initial values (on the CPU, drawn in fp32)
    std::vector<std::vector<int64_t>> prompts(
        size_t(batch), std::vector<int64_t>(size_t(prompt), 7));
    for (int64_t b = 0; b < batch; ++b)
      prompts[size_t(b)][0] = 1 + b % 100;
    GenerateOptions o;
    o.greedy = true;
    o.maxNewTokens = gen;
    // Eager steps first, side by side with graph replays (whose captures,
    // once per 128-position window and call, are inside the time). The
    // eager runs warm the graph run up: a GPU window is short, and a second
    // warm-up would be a quarter of decode's time.
    double eager = 0;
    if (device.is_cuda()) {
      o.cudaGraphs = false;
      eager = time(1, [&] { m.generate(prompts, o); });
      label("decode", s, batch, prompt, gen);
      std::printf("%10.1f tok/s  eager steps\n", double(batch * gen) / eager);
      o.cudaGraphs = true;
    }
    double t = time(
        1, [&] { m.generate(prompts, o); }, eager > 0 || probe);
    std::string how =
        device.is_cuda() ? " greedy steps as CUDA graphs, " : " greedy steps, ";
    if (eager > 0)
      how += "eager/graphs " + std::to_string(eager / t).substr(0, 4) + ", ";
    row("decode", s, batch, prompt, gen, double(batch * gen) / t,
        "generate: prefill + " + std::to_string(gen) + how + std::to_string(t) +
            " s");
  }

  void inference(const Shape &s, int64_t batch, int64_t seq) {
    LlamaModel m = model(s, seq, false);
    resetPeak();
    at::Tensor tokens = at::randint(0, s.shape.vocab, {batch, seq},
                                    at::TensorOptions().dtype(at::kLong))
                            .to(device);
    at::NoGradGuard ng;
    // What a compiled program's inference call runs.
    double t = time(
        2, [&] { m.tokenStat(tokens, /*entropy=*/false); }, probe);
    row("inference", s, batch, seq, 0, double(batch * seq) / t,
        "forward + token log-probs (LlamaModel::tokenStat), " +
            std::to_string(t) + " s");
  }

  void train(const Shape &s, int64_t batch, int64_t seq) {
    LlamaModel m = model(s, seq, true);
    resetPeak();
    Adam opt(AdamSettings{});
    TrainBatch b;
    b.inputs = {at::randint(0, s.shape.vocab, {batch, seq},
                            at::TensorOptions().dtype(at::kLong))};
    b.masks = {at::ones({batch, seq - 1}, at::kFloat)};
    FnProgram sft = testfns::stdlibFn("sft_loss");
    TrainOptions to;
    to.loss = &sft;
    double t = time(2, [&] { trainStep(m, opt, b, to); });
    row("train", s, batch, seq, 0, double(batch * seq) / t,
        std::string("trainStep: forward, backward, Adam on fp32 ") +
            (dtype == at::kFloat ? "weights, " : "masters, ") +
            std::to_string(t) + " s");
    // What a forward pass keeps for backward, beside the cost model's 34
    // bytes per token per layer per hidden unit (Korthikanti et al.).
    double before = deviceCurrentBytes(device);
    if (before > 0) {
      at::Tensor logits = m.forward(b.inputs[0].to(device));
      sync();
      const double tokens = double(batch * seq),
                   logitBytes = double(logits.numel()) * 4;
      double kept = deviceCurrentBytes(device) - before - logitBytes;
      std::printf("          forward keeps %.2f GiB besides fp32 logits: %.1f "
                  "bytes per token per layer per hidden unit (model: 34)\n",
                  kept / double(1 << 30),
                  kept / (tokens * double(s.shape.layers * s.shape.hidden)));
    }
  }
};

} // namespace

void usage() {
  std::fprintf(
      stderr,
      "usage: rlhf-bench-gpu-runtime --out DIR [--smoke|--probe|--cpu-compare "
      "[--fp32]] [--predicted FILE] [--pytorch CSV] [--hardware PRESET]\n"
      "       rlhf-bench-gpu-runtime --list-points [--smoke|--probe] "
      "[--hardware PRESET,...]\n"
      "PRESET: the cost model's hardware (H100_SXM, H200, A100_80GB, "
      "A100_40GB); default: the GPU's own, H100_SXM on the CPU\n");
}

int main(int argc, char **argv) {
  std::string out, predictedPath, hardware;
  std::vector<std::string> pytorchPaths; ///< --pytorch, once per file
  bool smoke = false, probe = false, list = false, cpuCompare = false,
       fp32 = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--out") && i + 1 < argc)
      out = argv[++i];
    else if (!std::strcmp(argv[i], "--predicted") && i + 1 < argc)
      predictedPath = argv[++i];
    else if (!std::strcmp(argv[i], "--pytorch") && i + 1 < argc)
      pytorchPaths.push_back(argv[++i]);
    else if (!std::strcmp(argv[i], "--hardware") && i + 1 < argc)
      hardware = argv[++i];
    else if (!std::strcmp(argv[i], "--smoke"))
      smoke = true;
    else if (!std::strcmp(argv[i], "--probe"))
      probe = true;
    else if (!std::strcmp(argv[i], "--cpu-compare"))
      cpuCompare = true;
    else if (!std::strcmp(argv[i], "--fp32"))
      fp32 = true;
    else if (!std::strcmp(argv[i], "--list-points"))
      list = true;
    else {
      usage();
      return 2;
    }
  }
  const char *header = "id,category,model,hardware,gpus,tp,pp,dp,batch,seq_in,"
                       "seq_out,dtype,metric,value,unit,source,notes\n";
  if (list) {
    // Rows for rlhf-cost-validate to predict (the value is a placeholder).
    std::printf("%s", header);
    int n = 0;
    std::stringstream presets(hardware.empty() ? "H100_SXM" : hardware);
    for (std::string hw; std::getline(presets, hw, ',');)
      for (const Point &p : points(smoke, probe))
        std::printf("point_%02d,%s,%s,%s,1,1,1,1,%lld,%lld,%s,bf16,"
                    "tokens_per_sec,1,tok/s,bench/RuntimeGpuBench.cpp,\n",
                    ++n, p.category, p.shape->name, hw.c_str(),
                    (long long)p.batch, (long long)p.in,
                    p.out ? std::to_string(p.out).c_str() : "");
    return 0;
  }
  if (out.empty() || (fp32 && !cpuCompare)) {
    usage();
    return 2;
  }
  Bench b;
  b.probe = probe;
  if (fp32)
    b.dtype = at::kFloat;
  // --cpu-compare runs on the CPU, GPU or not.
  if (!cpuCompare && cudaDeviceCount() > 0)
    b.device = c10::Device(c10::kCUDA, 0);
  else if (smoke || probe || cpuCompare)
    trackHostAllocations(); // the CPU's tensor peak, as the allocator's
  else {
    std::printf("rlhf-bench-gpu-runtime: SKIP: no CUDA device (--smoke runs on "
                "the CPU)\n");
    return 77;
  }
  const std::string gpu = deviceName(b.device);
  b.preset = !hardware.empty()    ? hardware
             : b.device.is_cuda() ? hardwarePreset(gpu)
                                  : "H100_SXM";
  if (b.preset.empty()) {
    std::fprintf(stderr,
                 "rlhf-bench-gpu-runtime: error: the cost model has no preset "
                 "for '%s'; pass --hardware with the closest (H100_SXM, H200, "
                 "A100_80GB, A100_40GB) to price its rows as that GPU\n",
                 gpu.c_str());
    return 2;
  }
  try {
    if (!predictedPath.empty())
      b.predicted = readPredictions(predictedPath, b.preset);
    for (const std::string &path : pytorchPaths)
      b.pytorch.merge(readPytorch(path, b.preset));
  } catch (const std::exception &e) {
    std::fprintf(stderr, "rlhf-bench-gpu-runtime: error: %s\n", e.what());
    return 1;
  }
  const std::string csvPath = out + "/runtime-" + tagOf(b.preset) + ".csv";
  b.csv.open(csvPath);
  if (!b.csv) {
    std::fprintf(stderr, "rlhf-bench-gpu-runtime: error: cannot write '%s'\n",
                 csvPath.c_str());
    return 1;
  }
  b.csv << header;
  const std::string where = b.device.is_cuda() ? "cuda:0 (" + gpu + ")"
                            : probe            ? "the CPU (memory probe)"
                            : cpuCompare       ? "the CPU (beside PyTorch)"
                                               : "the CPU (smoke)";
  std::printf("rlhfc runtime on %s, %s, random weights; rows priced as %s\n",
              where.c_str(), fp32 ? "fp32" : "bf16", b.preset.c_str());
  if (!pytorchPaths.empty() && b.pytorch.empty())
    std::printf("(no PyTorch rows on %s in %s: no runtime/PyTorch column)\n",
                b.preset.c_str(), joined(pytorchPaths).c_str());
  // A point that fails (out of memory, say) is reported and the rest still
  // run: a GPU window is too short to lose the rows after it.
  int failed = 0;
  const std::vector<Point> all = points(smoke, probe, cpuCompare);
  for (const Point &p : all) {
    try {
      if (!std::strcmp(p.category, "decode"))
        b.decode(*p.shape, p.batch, p.in, p.out);
      else if (!std::strcmp(p.category, "inference"))
        b.inference(*p.shape, p.batch, p.in);
      else
        b.train(*p.shape, p.batch, p.in);
    } catch (const std::exception &e) {
      ++failed;
      std::string what = firstLine(e.what());
      label(p.category, *p.shape, p.batch, p.in, p.out);
      std::printf("FAILED: %s\n", what.c_str());
      std::fflush(stdout);
    }
  }
  if (failed)
    std::printf("%d of %zu points failed\n", failed, all.size());
  if (b.memoryRows)
    std::printf("peak memory within 15%% of the plan: %d of %d calls\n",
                b.memoryWithin, b.memoryRows);
  if (!b.speedRatios.empty()) {
    double logSum = 0;
    for (double r : b.speedRatios)
      logSum += std::log(r);
    std::printf("runtime/cost-model geomean: %.2f\n",
                std::exp(logSum / double(b.speedRatios.size())));
  }
  return failed ? 1 : 0;
}
