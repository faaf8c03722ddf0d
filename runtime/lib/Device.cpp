//===- Device.cpp - the device a rank computes on -------------------------===//

#include "rlhf/runtime/Device.h"
#include "CudaIpc.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Store.h"

#include <ATen/Context.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

using namespace rlhf;

int rlhf::cudaDeviceCount() {
  // The hooks answer 0 without a driver; they never throw for that.
  return at::globalContext().hasCUDA()
             ? int(at::detail::getCUDAHooks().deviceCount())
             : 0;
}

namespace {
int indexOf(c10::Device device) {
  return device.has_index() ? int(device.index())
                            : int(at::detail::getCUDAHooks().current_device());
}
} // namespace

std::string rlhf::deviceName(c10::Device device) {
  return device.is_cuda() ? ipc::deviceName(indexOf(device)) : "";
}

double rlhf::deviceMemoryBytes(c10::Device device) {
  return device.is_cuda() ? ipc::deviceMemory(indexOf(device)) : 0.0;
}

std::string rlhf::hardwarePreset(const std::string &gpu) {
  auto has = [&](const char *s) { return gpu.find(s) != std::string::npos; };
  if (has("PCIe") || has("NVL"))
    return "";
  if (has("H200"))
    return "H200";
  if (has("H100") || has("H800"))
    return "H100_SXM";
  if (has("A100") || has("A800"))
    return has("80GB") ? "A100_80GB" : "A100_40GB";
  return "";
}

c10::Device rlhf::selectDevice(const RendezvousConfig &cfg) {
  std::string want = "auto";
  if (const char *v = std::getenv("RLHF_DEVICE"); v && *v)
    want = v;
  // Errors name no rank: whoever reports them (the program's die, asRank)
  // prefixes "rank R: error:".
  if (want != "auto" && want != "cpu" && want != "cuda")
    throw Error("environment variable RLHF_DEVICE='" + want +
                "' is not one of cpu, cuda, auto");
  if (want == "cpu")
    return c10::Device(c10::kCPU);
  int n = cudaDeviceCount();
  if (n == 0) {
    if (want == "cuda")
      throw Error(
          "RLHF_DEVICE=cuda, but no CUDA device is visible (check "
          "nvidia-smi and CUDA_VISIBLE_DEVICES, or set RLHF_DEVICE=cpu)");
    return c10::Device(c10::kCPU);
  }
  c10::Device dev(c10::kCUDA, c10::DeviceIndex(cfg.localRank % n));
  // Later allocations and kernels without an explicit device go there too.
  c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(dev);
  // The caching allocator exists only after CUDA's lazy init, which the
  // first CUDA tensor triggers; a rank whose first act reads its peak (an
  // asynchronous generator's span) would otherwise find none.
  at::globalContext().lazyInitDevice(c10::kCUDA);
  return dev;
}

namespace {

/// LibTorch's CPU allocations, counted: 64-byte aligned blocks (as c10's
/// own) with the size in a 64-byte header, so the deleter is a plain
/// function and raw allocations work too.
class CountingCpuAllocator final : public c10::Allocator {
public:
  static constexpr size_t kHeader = 64;
  std::atomic<int64_t> current{0}, peak{0};

  c10::DataPtr allocate(size_t n) override {
    void *block = nullptr;
    if (posix_memalign(&block, kHeader, n + kHeader) != 0)
      throw std::bad_alloc();
    std::memcpy(block, &n, sizeof(n));
    int64_t now = current.fetch_add(int64_t(n)) + int64_t(n);
    for (int64_t p = peak.load();
         now > p && !peak.compare_exchange_weak(p, now);)
      ;
    void *data = static_cast<char *>(block) + kHeader;
    return {data, data, &release, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void *dst, const void *src, size_t n) const override {
    std::memcpy(dst, src, n);
  }
  static void release(void *data) {
    if (!data)
      return;
    char *block = static_cast<char *>(data) - kHeader;
    size_t n;
    std::memcpy(&n, block, sizeof(n));
    instance().current.fetch_sub(int64_t(n));
    std::free(block);
  }
  static CountingCpuAllocator &instance() {
    static CountingCpuAllocator *a = new CountingCpuAllocator; // never freed:
    return *a; // tensors may outlive static destruction
  }
};

std::atomic<bool> hostTracked{false};

} // namespace

void rlhf::trackHostAllocations() {
  if (hostTracked.exchange(true))
    return;
  c10::SetCPUAllocator(&CountingCpuAllocator::instance(), /*priority=*/200);
}

namespace {

/// The allocator's bytes handed out: now, or at their peak.
double allocatedBytes(c10::Device device, bool peak) {
  if (!device.is_cuda()) {
    const auto &a = CountingCpuAllocator::instance();
    return hostTracked ? double(peak ? a.peak.load() : a.current.load()) : 0.0;
  }
  at::globalContext().lazyInitDevice(c10::kCUDA); // see selectDevice
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  const auto &s =
      stats.allocated_bytes[size_t(c10::CachingAllocator::StatType::AGGREGATE)];
  return double(peak ? s.peak : s.current);
}

} // namespace

double rlhf::devicePeakBytes(c10::Device device) {
  return allocatedBytes(device, /*peak=*/true);
}

double rlhf::deviceCurrentBytes(c10::Device device) {
  return allocatedBytes(device, /*peak=*/false);
}

void rlhf::resetPeakBytes(c10::Device device) {
  if (device.is_cuda()) {
    at::globalContext().lazyInitDevice(c10::kCUDA); // see selectDevice
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
    return;
  }
  auto &a = CountingCpuAllocator::instance();
  a.peak.store(a.current.load());
}

void SpanPeaks::fold() {
  const double peak = devicePeakBytes(device);
  for (double &o : open)
    o = std::max(o, peak);
  run = std::max(run, peak);
  resetPeakBytes(device);
}

void SpanPeaks::begin() {
  fold();
  open.push_back(deviceCurrentBytes(device));
}

double SpanPeaks::end() {
  fold();
  double peak = open.back();
  open.pop_back();
  return peak;
}

double SpanPeaks::overall() {
  fold();
  return run;
}

std::unique_ptr<Communicator>
rlhf::createWorldCommunicator(const RendezvousConfig &cfg, c10::Device device) {
  std::string want;
  if (const char *v = std::getenv("RLHF_BACKEND"); v && *v)
    want = v;
  if (!want.empty() && want != "gloo" && want != "nccl")
    throw Error("environment variable RLHF_BACKEND='" + want +
                "' is not one of gloo, nccl");
  c10::intrusive_ptr<c10d::TCPStore> store;
  if (want.empty() && !device.is_cuda()) {
    want = "gloo";
  } else if (want.empty() && cfg.localWorldSize <= cudaDeviceCount()) {
    want = "nccl"; // cuda:LOCAL_RANK is this rank's own
  } else if (want.empty()) {
    // Fewer visible devices than ranks on the host: ranks share GPUs, or the
    // launcher gave each its own (CUDA_VISIBLE_DEVICES per rank). The ranks
    // compare their devices, so that all pick the same backend.
    store = openStore(cfg);
    want = ranksHaveDistinctDevices(*store, cfg, ipc::deviceUuid()) ? "nccl"
                                                                    : "gloo";
  }
  return want == "nccl" ? createNcclCommunicator(cfg, store)
                        : createGlooCommunicator(cfg, store, device);
}

namespace {

/// One rank of a job: `join` builds its world from the environment, `body`
/// runs on it. An exception becomes "rank R: error: ..." on stderr and exit
/// code 1, so the launcher can name the failing rank.
int asRank(const std::function<int(const RendezvousConfig &)> &join) {
  int rank = -1;
  try {
    RendezvousConfig cfg = RendezvousConfig::fromEnv();
    rank = cfg.rank;
    return join(cfg);
  } catch (const c10::Error &e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank,
                 e.what_without_backtrace());
    return 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    return 1;
  }
}

} // namespace

int rlhf::runWorker(
    const std::function<int(Communicator &, c10::Device)> &body) {
  return asRank([&](const RendezvousConfig &cfg) {
    c10::Device device = selectDevice(cfg);
    if (!device.is_cuda())
      trackHostAllocations();
    std::unique_ptr<Communicator> world = createWorldCommunicator(cfg, device);
    return body(*world, device);
  });
}

int rlhf::runGlooWorker(const std::function<int(Communicator &world)> &body) {
  return asRank([&](const RendezvousConfig &cfg) {
    std::unique_ptr<Communicator> world = createGlooCommunicator(cfg);
    return body(*world);
  });
}

void rlhf::checkRuntimeSwitches() {
  static const std::pair<const char *, std::vector<std::string>> known[] = {
      {"RLHF_CUDA_GRAPHS", {"0", "1", "require"}},
      {"RLHF_CUDA_IPC", {"0", "1"}},
      {"RLHF_HOST_FNS", {"device", "cpu"}},
      {"RLHF_TP_SHARD_SEQUENCE", {"0", "1"}},
      {"RLHF_FUSED_KERNELS", {"0", "1", "cpu"}},
      {"RLHF_PIPELINE_SCHEDULE", {"1f1b", "sequential"}},
  };
  for (const auto &[name, values] : known) {
    const char *v = std::getenv(name);
    if (!v || !*v || std::find(values.begin(), values.end(), v) != values.end())
      continue;
    std::string list;
    for (const std::string &x : values)
      list += (list.empty() ? "" : ", ") + x;
    throw Error(std::string("environment variable ") + name + "='" + v +
                "' is not one of " + list);
  }
}

at::ScalarType rlhf::selectPrecision(const RendezvousConfig &cfg,
                                     c10::Device device) {
  const char *v = std::getenv("RLHF_PRECISION");
  std::string want = v && *v ? v : (device.is_cuda() ? "bf16" : "fp32");
  if (want == "bf16")
    return at::kBFloat16;
  if (want == "fp32")
    return at::kFloat;
  throw Error("environment variable RLHF_PRECISION='" + want +
              "' is not one of bf16, fp32");
}
