//===- Device.h - the device a rank computes on -----------------*- C++ -*-===//
//
// Model state (weights, optimizer state, KV cache) lives on the rank's
// device; batch values stay in the executor on the host, and a model call
// moves its inputs in and its outputs out.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_DEVICE_H
#define RLHF_RUNTIME_DEVICE_H

#include "rlhf/runtime/Rendezvous.h"

#include <c10/core/Device.h>

namespace rlhf {

/// The device this rank computes on, from RLHF_DEVICE: `cpu`, `cuda`, or
/// `auto` (the default: CUDA where a device is visible, else the CPU). With
/// CUDA the rank binds cuda:(LOCAL_RANK mod the visible devices), so
/// CUDA_VISIBLE_DEVICES picks which, and several ranks may share one GPU.
/// Throws rlhf::Error naming the rank and the variable on a bad value, or
/// when `cuda` is asked for and no device is visible.
c10::Device selectDevice(const RendezvousConfig &cfg);

/// CUDA devices visible to this process (0 without a driver or a device).
int cudaDeviceCount();

/// Peak bytes the CUDA caching allocator has handed out on `device` since
/// the process started (what the plan's per-GPU memory predicts); 0 on CPU.
double devicePeakBytes(c10::Device device);

} // namespace rlhf

#endif // RLHF_RUNTIME_DEVICE_H
