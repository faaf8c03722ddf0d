//===- Device.h - the device a rank computes on -----------------*- C++ -*-===//
//
// Model state (weights, optimizer state, KV cache) lives on the rank's
// device; batch values stay in the executor on the host, and a model call
// moves its inputs in and its outputs out.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_DEVICE_H
#define RLHF_RUNTIME_DEVICE_H

#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Rendezvous.h"

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rlhf {

/// The device this rank computes on, from RLHF_DEVICE: `cpu`, `cuda`, or
/// `auto` (the default: CUDA where a device is visible, else the CPU). With
/// CUDA the rank binds cuda:(LOCAL_RANK mod the visible devices), so
/// CUDA_VISIBLE_DEVICES picks which, and several ranks may share one GPU.
/// Throws rlhf::Error naming the rank and the variable on a bad value, or
/// when `cuda` is asked for and no device is visible.
c10::Device selectDevice(const RendezvousConfig &cfg);

/// The weights' dtype from RLHF_PRECISION: `bf16` (bf16 weights and
/// activations, fp32 master weights, Adam state, norms, softmax, logits and
/// losses: Megatron's mixed precision) or `fp32`. Default: bf16 on CUDA,
/// fp32 on the CPU. A bad value is an error naming the rank.
at::ScalarType selectPrecision(const RendezvousConfig &cfg, c10::Device device);

/// Throws, naming the variable and its values, when a runtime switch
/// (RLHF_CUDA_GRAPHS, RLHF_CUDA_IPC, RLHF_HOST_FNS, RLHF_TP_SHARD_SEQUENCE,
/// RLHF_FUSED_KERNELS, RLHF_PIPELINE_SCHEDULE) has a value it does not
/// know: said at start, not ignored or found after generation ran.
void checkRuntimeSwitches();

/// The job's communicator for a rank computing on `device`: NCCL where every
/// rank of this host owns a GPU, else Gloo (on the CPU, or with several ranks
/// sharing a GPU, staged through host memory). RLHF_BACKEND=gloo|nccl
/// overrides the choice; a bad value is an error naming the rank.
std::unique_ptr<Communicator>
createWorldCommunicator(const RendezvousConfig &cfg, c10::Device device);

/// Runs `body` as one rank of a job (rlhf-run, torchrun or the tests'
/// harness): picks the device (selectDevice) and joins the job over
/// createWorldCommunicator. An exception becomes "rank R: error: ..." on
/// stderr and exit code 1, so the launcher can name the failing rank.
int runWorker(
    const std::function<int(Communicator &world, c10::Device device)> &body);

/// CUDA devices visible to this process (0 without a driver or a device).
int cudaDeviceCount();

/// The GPU's name as the driver gives it ("NVIDIA H200"); empty for the CPU.
std::string deviceName(c10::Device device);

/// The GPU's memory in bytes; 0 for the CPU.
double deviceMemoryBytes(c10::Device device);

/// The cost model's hardware preset of a GPU the driver names `gpu`
/// (H100_SXM, H200, A100_80GB, A100_40GB); empty for GPUs no preset
/// describes, PCIe and NVL boards among them (their clocks and bandwidths
/// differ from the SXM parts').
std::string hardwarePreset(const std::string &gpu);

/// Peak bytes the CUDA caching allocator has handed out on `device` since
/// the process started or resetPeakBytes (what the plan's per-GPU memory
/// predicts); on the CPU, the peak of CPU tensor bytes when
/// trackHostAllocations is on, else 0.
double devicePeakBytes(c10::Device device);
/// The bytes those allocators hand out now.
double deviceCurrentBytes(c10::Device device);
void resetPeakBytes(c10::Device device);

/// The allocator's peak per span of work (a call, a reallocation), over
/// the one counter resetPeakBytes resets: a span's peak counts the spans
/// nested in it, and overall() the whole run.
class SpanPeaks {
public:
  explicit SpanPeaks(c10::Device device) : device(device) {}

  /// One span of `peaks` (none when null), closed by close() or, when an
  /// exception leaves it, by its destructor.
  class Span {
  public:
    explicit Span(SpanPeaks *peaks) : peaks(peaks) {
      if (peaks)
        peaks->begin();
    }
    ~Span() { close(); }
    Span(const Span &) = delete;
    Span &operator=(const Span &) = delete;
    /// Its peak bytes (0 without a SpanPeaks).
    double close() {
      if (peaks)
        peak = peaks->end();
      peaks = nullptr;
      return peak;
    }

  private:
    SpanPeaks *peaks;
    double peak = 0;
  };

  void begin();
  /// Closes the innermost open span: its peak bytes.
  double end();
  double overall();

private:
  /// Folds the counter's peak into every open span and the run, then
  /// restarts it.
  void fold();
  c10::Device device;
  std::vector<double> open;
  double run = 0;
};

/// Counts the bytes of CPU tensors from now on (LibTorch's CPU allocator is
/// replaced by a counting one), so that a CPU run measures its tensors' peak
/// as the CUDA caching allocator's statistics do on a GPU. runWorker turns
/// it on for CPU workers. Idempotent.
void trackHostAllocations();

} // namespace rlhf

#endif // RLHF_RUNTIME_DEVICE_H
