//===- CudaWatch.h - the watchdog's poll of queued CUDA work ----*- C++ -*-===//

#ifndef RLHF_RUNTIME_CUDAWATCH_H
#define RLHF_RUNTIME_CUDAWATCH_H

#include "CommWatchdog.h"

#include <cuda_runtime_api.h>

namespace rlhf {

/// Whether the work queued before `event` was recorded has ended. Safe on
/// the watchdog's thread while the caller's is blocked in a sync.
inline CommWatchdog::State pollCudaEvent(cudaEvent_t event, std::string &why) {
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
