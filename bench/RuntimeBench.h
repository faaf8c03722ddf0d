//===- RuntimeBench.h - device handling shared by the runtime benchmarks --===//
//
// The runtime benchmarks time work on a device with a device synchronize
// around it, and the single-process ones take `--cpu` to stay off a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_BENCH_RUNTIMEBENCH_H
#define RLHFC_BENCH_RUNTIMEBENCH_H

#include "rlhf/runtime/Device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

namespace rlhf::bench {

/// Waits for everything queued on `device`; nothing to wait for on the CPU.
inline void synchronize(c10::Device device) {
  if (device.is_cuda())
    c10::impl::getDeviceGuardImpl(c10::kCUDA)
        ->synchronizeDevice(device.index());
}

/// Mean seconds of `reps` calls of `f` on `device`, from a synchronized
/// start to a synchronized end (warm-ups are the caller's).
template <typename F>
double meanSeconds(c10::Device device, int reps, const F &f) {
  synchronize(device);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i)
    f();
  synchronize(device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
             .count() /
         reps;
}

/// The device of `name [--cpu]`: cuda:0 where one is visible, unless --cpu.
/// Other arguments print the usage and give nothing.
inline std::optional<c10::Device> deviceFromArgs(int argc, char **argv,
                                                 const char *name) {
  const bool cpu = argc > 1 && !std::strcmp(argv[1], "--cpu");
  if (argc > 2 || (argc == 2 && !cpu)) {
    std::fprintf(stderr, "usage: %s [--cpu]\n", name);
    return std::nullopt;
  }
  if (!cpu && cudaDeviceCount() > 0)
    return c10::Device(c10::kCUDA, 0);
  return c10::Device(c10::kCPU);
}

/// For the benchmarks rlhf-run launches, which take no arguments: true
/// (after printing `usage` to stdout) for --help or -h, and true (after an
/// error on stderr, setting `rc` to 2) for anything else, so that no
/// argument is silently ignored.
inline bool workerArgsHandled(int argc, char **argv, const char *usage,
                              int &rc) {
  if (argc <= 1)
    return false;
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::printf("%s", usage);
    rc = 0;
  } else {
    std::fprintf(stderr, "%s: unknown argument '%s'\n%s", argv[0], argv[1],
                 usage);
    rc = 2;
  }
  return true;
}

} // namespace rlhf::bench

#endif // RLHFC_BENCH_RUNTIMEBENCH_H
