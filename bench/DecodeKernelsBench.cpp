//===- DecodeKernelsBench.cpp - where a decode step's device time goes ----===//
//
// `rlhf-bench-decode-kernels [--out DIR] [--cpu]`: LLaMA-2 7B's shape in
// bf16 with random weights, held in one block as a rank holds its shard,
// generating greedily from a 128-token prompt at batch 1 and 64, eager and
// as CUDA graphs. Kineto profiles two generations of each, with 2 and 34 new
// tokens (each with one decode step that captures the graphs); their
// difference is 32 decode steps. Per step it prints the
// wall time, the kernels' summed device time and count (busy = device time
// over wall time), then the 12 kernels of most time. With --out, the
// 34-token trace as Chrome JSON. `--cpu` runs a small model on the CPU with
// CPU activities (operators instead of kernels), so that the benchmark
// keeps building and running without a GPU. There it runs on one thread,
// profiles each generation 5 times, interleaved, and keeps the quickest:
// with 12 steps, two intra-op threads and ctest's other job on a 2-core
// machine, the difference once came out negative. The last line is the
// headline: `decode step at batch 1, graphs: X.XX ms, busy Y%`.
//
//===----------------------------------------------------------------------===//

#include "RuntimeBench.h"

#include <ATen/Parallel.h>

#include "rlhf/runtime/Device.h"
#include "rlhf/runtime/Model.h"
#include "rlhf/runtime/Realloc.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

using namespace rlhf;
namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;

namespace {

/// Device time (ns) and count per kernel name, over one profiled call.
struct Kernels {
  std::map<std::string, std::pair<double, int64_t>> byName;
  double wallNs = 0;
};

Kernels profiled(c10::Device device, const std::function<void()> &f,
                 const std::string &trace) {
  const bool gpu = device.is_cuda();
  std::set<ActivityType> acts{gpu ? ActivityType::CUDA : ActivityType::CPU};
  torch::profiler::impl::ProfilerConfig cfg(
      torch::profiler::impl::ProfilerState::KINETO);
  prof::prepareProfiler(cfg, acts);
  prof::enableProfiler(cfg, acts);
  bench::synchronize(device);
  auto t0 = std::chrono::steady_clock::now();
  f();
  bench::synchronize(device);
  Kernels k;
  k.wallNs = std::chrono::duration<double, std::nano>(
                 std::chrono::steady_clock::now() - t0)
                 .count();
  std::unique_ptr<prof::ProfilerResult> r = prof::disableProfiler();
  for (const prof::KinetoEvent &e : r->events()) {
    // On a GPU the device's kernels and copies; on the CPU top-level ops.
    bool take = gpu ? e.deviceType() == c10::DeviceType::CUDA
                    : e.deviceType() == c10::DeviceType::CPU &&
                          e.name().rfind("aten::", 0) == 0;
    if (!take)
      continue;
    auto &[ns, n] = k.byName[e.name()];
    ns += double(e.durationNs());
    ++n;
  }
  if (!trace.empty())
    r->save(trace);
  return k;
}

/// `longer` minus `shorter`, divided by `steps`: one decode step's share.
void report(const char *what, const Kernels &shorter, const Kernels &longer,
            int steps, double *stepMs, double *busy) {
  std::vector<std::pair<std::string, std::pair<double, double>>> rows;
  double total = 0, count = 0;
  for (const auto &[name, v] : longer.byName) {
    auto it = shorter.byName.find(name);
    double ns = v.first - (it == shorter.byName.end() ? 0 : it->second.first);
    double n = double(v.second) -
               double(it == shorter.byName.end() ? 0 : it->second.second);
    if (n <= 0 && ns <= 0)
      continue;
    rows.push_back({name, {ns / steps, n / steps}});
    total += ns / steps;
    count += n / steps;
  }
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.first > b.second.first;
  });
  *stepMs = (longer.wallNs - shorter.wallNs) / steps / 1e6;
  *busy = *stepMs > 0 ? total / 1e6 / *stepMs : 0;
  std::printf("%s: step %.3f ms wall, %.3f ms in %.0f kernels (busy %.0f%%)\n",
              what, *stepMs, total / 1e6, count, 100 * *busy);
  for (size_t i = 0; i < rows.size() && i < 12; ++i)
    std::printf("  %8.1f us %6.1f x  %.90s\n", rows[i].second.first / 1e3,
                rows[i].second.second, rows[i].first.c_str());
  std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv) {
  std::string out;
  bool cpu = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--out") && i + 1 < argc)
      out = argv[++i];
    else if (!std::strcmp(argv[i], "--cpu"))
      cpu = true;
    else {
      std::fprintf(stderr,
                   "usage: rlhf-bench-decode-kernels [--out DIR] [--cpu]\n");
      return 2;
    }
  }
  if (!cpu && cudaDeviceCount() == 0) {
    std::printf("rlhf-bench-decode-kernels: SKIP: no CUDA device (--cpu runs "
                "a small model on the CPU)\n");
    return 77;
  }
  const c10::Device device =
      cpu ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, 0);
  const int64_t prompt = cpu ? 16 : 128;
  const int steps = 32;
  const int repeats = cpu ? 5 : 1;
  if (cpu)
    at::set_num_threads(1); // a busy sibling core stalls a 2-thread op
  ModelConfig cfg;
  cfg.shape = cpu ? ModelShape{2, 256, 4, 4, 688, 32000, false, false}
                  : ModelShape{32, 4096, 32, 32, 11008, 32000, false, false};
  cfg.maxSeq = prompt + steps + 2;
  const auto opts = at::TensorOptions().device(device).dtype(
      cpu ? at::kFloat : at::kBFloat16);
  at::NoGradGuard noGrad;
  LlamaModel m(cfg, layoutShard(cfg, initParams(cfg, 1, opts), {0, 1, 1, 1}, 0),
               {});
  std::printf("decode steps of %s on %s, %s, prompt %lld, %d steps\n",
              cpu ? "a small LLaMA" : "LLaMA-2 7B", device.str().c_str(),
              cpu ? "fp32" : "bf16", (long long)prompt, steps);
  double headlineMs = 0, headlineBusy = 0;
  for (int64_t batch : {int64_t(1), int64_t(cpu ? 4 : 64)}) {
    std::vector<std::vector<int64_t>> prompts(
        size_t(batch), std::vector<int64_t>(size_t(prompt), 7));
    for (bool graphs : {false, true}) {
      if (graphs && cpu)
        continue;
      GenerateOptions o;
      o.greedy = true;
      o.cudaGraphs = graphs;
      auto gen = [&](int64_t n) {
        o.maxNewTokens = n;
        return [&m, &prompts, o] { m.generate(prompts, o); };
      };
      gen(steps + 2)(); // warm-up: kernels chosen, graphs of this shape
      std::string trace =
          out.empty() ? ""
                      : out + "/decode-b" + std::to_string(batch) +
                            (graphs ? "-graphs" : "-eager") + ".json";
      // The quickest of `repeats` profiles each: noise only ever adds time.
      // Short and long alternate so that a slow spell hits both. CUDA graphs
      // live for one generate: its first decode step captures them, so both
      // runs have one decode step (and its capture) and the difference is
      // `steps` replays.
      Kernels a = profiled(device, gen(2), "");
      Kernels b = profiled(device, gen(steps + 2), trace);
      for (int r = 1; r < repeats; ++r) {
        Kernels k = profiled(device, gen(2), "");
        if (k.wallNs < a.wallNs)
          a = std::move(k);
        k = profiled(device, gen(steps + 2), "");
        if (k.wallNs < b.wallNs)
          b = std::move(k);
      }
      char what[64];
      std::snprintf(what, sizeof(what), "batch %lld, %s", (long long)batch,
                    graphs ? "graphs" : cpu ? "eager (CPU ops)" : "eager");
      double ms, busy;
      report(what, a, b, steps, &ms, &busy);
      if (batch == 1 && (graphs || cpu)) {
        headlineMs = ms;
        headlineBusy = busy;
      }
    }
  }
  std::printf("decode step at batch 1, %s: %.2f ms, busy %.0f%%\n",
              cpu ? "eager (CPU)" : "graphs", headlineMs, 100 * headlineBusy);
  return 0;
}
