//===- SelfTest.cpp - device discovery and a CUDA/cuBLAS/NCCL check -------===//

#include "rlhf/cuda/Cuda.h"

#include <cmath>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdexcept>
#include <string>
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
  // Each step's own error, so a failure names what failed.
  auto check = [](cudaError_t e, const char *what) {
    if (e != cudaSuccess)
      throw std::runtime_error(std::string(what) + ": " +
                               cudaGetErrorString(e));
  };
  auto checkNccl = [](ncclResult_t r, const char *what) {
    if (r != ncclSuccess)
      throw std::runtime_error(std::string(what) + ": " +
                               ncclGetErrorString(r));
  };
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  std::string err;
  try {
    check(cudaMalloc(&da, ha.size() * 4), "cudaMalloc");
    check(cudaMalloc(&db, hb.size() * 4), "cudaMalloc");
    check(cudaMalloc(&dc, hc.size() * 4), "cudaMalloc");
    check(cudaMemcpy(da, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice),
          "cudaMemcpy to the device");
    check(cudaMemcpy(db, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice),
          "cudaMemcpy to the device");
    gemm(da, db, dc, m, n, k);
    axpy(2.0f, dc, dc, hc.size(), nullptr); // dc = 3 * A*B
    check(cudaGetLastError(), "the axpy kernel's launch");
    check(cudaDeviceSynchronize(), "gemm and axpy");
    ncclComm_t comm;
    int dev = 0;
    checkNccl(ncclCommInitAll(&comm, 1, &dev), "ncclCommInitAll");
    checkNccl(
        ncclAllReduce(dc, dc, hc.size(), ncclFloat, ncclSum, comm, nullptr),
        "ncclAllReduce");
    check(cudaDeviceSynchronize(), "the all-reduce");
    ncclCommDestroy(comm);
    check(cudaMemcpy(hc.data(), dc, hc.size() * 4, cudaMemcpyDeviceToHost),
          "cudaMemcpy to the host");
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
