//===- Kernels.cu - device kernels ----------------------------------------===//

#include "rlhf/cuda/Cuda.h"

#include <cuda_runtime.h>

namespace {
__global__ void axpyKernel(float alpha, const float *x, float *y, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    y[i] = alpha * x[i] + y[i];
}

__global__ void spinKernel(const volatile int *flag, long long maxCycles) {
  const long long t0 = clock64();
  while (*flag == 0 && clock64() - t0 < maxCycles) {
  }
}
} // namespace

void rlhf::cuda::axpy(float alpha, const float *x, float *y, size_t n,
                      void *stream) {
  constexpr unsigned kBlock = 256;
  unsigned grid = static_cast<unsigned>((n + kBlock - 1) / kBlock);
  axpyKernel<<<grid, kBlock, 0, static_cast<cudaStream_t>(stream)>>>(alpha, x,
                                                                     y, n);
}

void rlhf::cuda::spinUntil(const int *flag, long long maxCycles, void *stream) {
  spinKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(flag, maxCycles);
}
