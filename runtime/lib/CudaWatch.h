//===- CudaWatch.h - the watchdog's poll of queued CUDA work ----*- C++ -*-===//

#ifndef RLHF_RUNTIME_CUDAWATCH_H
#define RLHF_RUNTIME_CUDAWATCH_H

#include "CommWatchdog.h"

#include <cuda_runtime_api.h>

namespace rlhf {

/// Whether the work queued on `device` before `event` was recorded has
/// ended. Called on the watchdog's thread, which it binds to `device` (not
/// device 0, where a context of every rank would cost memory) and puts in
/// thread-local capture mode: in the default global mode, its query while
/// another thread captures a CUDA graph (decode steps) would invalidate
/// that capture, as PyTorch's NCCL watchdog found (pytorch#148594).
inline CommWatchdog::State pollCudaEvent(cudaEvent_t event, int device,
                                         std::string &why) {
  thread_local int bound = -1;
  if (bound != device) {
    cudaSetDevice(device);
    cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
    cudaThreadExchangeStreamCaptureMode(&mode);
    bound = device;
  }
  cudaError_t e = cudaEventQuery(event);
  if (e == cudaSuccess)
    return CommWatchdog::State::Done;
  if (e == cudaErrorNotReady)
    return CommWatchdog::State::Pending;
  why = cudaGetErrorString(e);
  return CommWatchdog::State::Failed;
}

} // namespace rlhf

#endif // RLHF_RUNTIME_CUDAWATCH_H
