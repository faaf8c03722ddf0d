//===- Blas.cpp - cuBLAS wrappers -----------------------------------------===//

#include "rlhf/cuda/Cuda.h"

#include <cublas_v2.h>
#include <stdexcept>

void rlhf::cuda::gemm(const float *a, const float *b, float *c, int m, int n,
                      int k) {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cublasCreate failed");
  const float one = 1.0f, zero = 0.0f;
  // Row-major C = A*B is column-major C^T = B^T * A^T.
  cublasStatus_t st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one,
                                  b, n, a, k, &zero, c, n);
  cublasDestroy(h);
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cublasSgemm failed");
}
