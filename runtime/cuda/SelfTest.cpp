//===- SelfTest.cpp - device discovery and a CUDA/cuBLAS/NCCL check -------===//

#include "rlhf/cuda/Cuda.h"

#include <cmath>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdexcept>
#include <vector>

using namespace rlhf;

int cuda::deviceCount(std::string *whyNone) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (whyNone)
      *whyNone = cudaGetErrorString(e);
    return 0;
  }
  return n;
}

std::string cuda::selfTest() {
  std::string why;
  if (deviceCount(&why) == 0)
    return "no CUDA device: " + why;
  const int m = 4, n = 3, k = 2;
  std::vector<float> ha(m * k), hb(k * n), hc(m * n);
  for (int i = 0; i < m * k; ++i)
    ha[i] = float(i + 1);
  for (int i = 0; i < k * n; ++i)
    hb[i] = float(2 * i - 3);
  float *da, *db, *dc;
  cudaMalloc(&da, ha.size() * 4);
  cudaMalloc(&db, hb.size() * 4);
  cudaMalloc(&dc, hc.size() * 4);
  cudaMemcpy(da, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice);
  std::string err;
  try {
    gemm(da, db, dc, m, n, k);
    axpy(2.0f, dc, dc, hc.size(), nullptr); // dc = 3 * A*B
    ncclComm_t comm;
    int dev = 0;
    if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess)
      throw std::runtime_error("ncclCommInitAll failed");
    ncclAllReduce(dc, dc, hc.size(), ncclFloat, ncclSum, comm, nullptr);
    cudaDeviceSynchronize();
    ncclCommDestroy(comm);
    cudaMemcpy(hc.data(), dc, hc.size() * 4, cudaMemcpyDeviceToHost);
    for (int i = 0; i < m && err.empty(); ++i)
      for (int j = 0; j < n; ++j) {
        float ref = 0;
        for (int p = 0; p < k; ++p)
          ref += ha[i * k + p] * hb[p * n + j];
        if (std::fabs(hc[i * n + j] - 3 * ref) > 1e-3f) {
          err = "gemm/axpy/all-reduce result mismatch";
          break;
        }
      }
  } catch (const std::exception &e) {
    err = e.what();
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return err;
}
