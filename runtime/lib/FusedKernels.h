//===- FusedKernels.h - launching the fused CUDA kernels --------*- C++ -*-===//
//
// Torch-free entry points into FusedKernels.cu (nvcc compiles it without
// LibTorch's headers beyond c10's 16-bit floats). Each launches one kernel
// over every group of `width` elements on `stream` (a cudaStream_t) and
// returns an error message, or nullptr once the launch is queued.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_FUSEDKERNELS_H
#define RLHF_RUNTIME_FUSEDKERNELS_H

#include "FusedElements.h"

namespace rlhf::fused {

/// Whether this build compiled the kernels (false without CUDA).
bool haveKernels();

const char *launchSwiGluForward(Dtype dtype, int width, const SwiGluArgs &a,
                                void *stream);
const char *launchSwiGluBackward(Dtype dtype, int width, const SwiGluArgs &a,
                                 void *stream);
const char *launchRotary(Dtype dtype, int width, const RotaryArgs &a,
                         void *stream);

/// Every slice of `a` in one launch, in units of `unitBytes`.
const char *launchCopies(int unitBytes, const CopyArgs &a, void *stream);

} // namespace rlhf::fused

#endif // RLHF_RUNTIME_FUSEDKERNELS_H
