//===- Cuda.h - CUDA, cuBLAS and NCCL entry points --------------*- C++ -*-===//
//
// Plain C++ interface over the device code so that no caller needs CUDA
// headers. Built only when the CUDA toolkit is found.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_CUDA_CUDA_H
#define RLHF_CUDA_CUDA_H

#include <cstddef>
#include <string>

namespace rlhf::cuda {

/// Number of visible CUDA devices; 0 when there is no driver or device.
int deviceCount(std::string *whyNone = nullptr);

/// y[i] = alpha * x[i] + y[i] on device memory (our own kernel).
void axpy(float alpha, const float *x, float *y, size_t n, void *stream);

/// A kernel that runs until the host sets `*flag` (mapped host memory, as
/// its device pointer) or `maxCycles` pass: a collective whose peer is gone.
void spinUntil(const int *flag, long long maxCycles, void *stream);

/// C[m,n] = A[m,k] * B[k,n], row-major fp32, through cuBLAS.
void gemm(const float *a, const float *b, float *c, int m, int n, int k);

/// Runs axpy, gemm and a one-rank NCCL all-reduce on device 0 and checks the
/// results against the host; then has the communicators' watchdog time out
/// a stuck kernel and so release a host sync behind it. Returns an empty
/// string on success, otherwise what failed.
std::string selfTest();

/// The watchdog part of selfTest.
std::string watchdogTest();

} // namespace rlhf::cuda

#endif // RLHF_CUDA_CUDA_H
