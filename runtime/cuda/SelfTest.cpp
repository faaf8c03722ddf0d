//===- SelfTest.cpp - device discovery and a CUDA/cuBLAS/NCCL check -------===//

#include "rlhf/cuda/Cuda.h"

#include "CudaWatch.h"

#include <chrono>
#include <cmath>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace rlhf;

namespace {
/// Each step's own error, so that a failure names what failed.
void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
} // namespace

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
  return err.empty() ? watchdogTest() : err;
}

/// What the NCCL backend relies on: the watchdog's thread polls a CUDA event
/// while another thread captures a CUDA graph, and the capture survives;
/// then a kernel never ends (a collective whose peer died), a host sync
/// blocks behind it, and the watchdog times it out and runs the abort,
/// which here ends the kernel as ncclCommAbort ends NCCL's.
std::string cuda::watchdogTest() {
  using namespace std::chrono;
  int *flag = nullptr, *deviceFlag = nullptr, device = 0;
  float *buffer = nullptr;
  cudaStream_t stream = nullptr, capture = nullptr;
  cudaEvent_t event = nullptr;
  cudaGraph_t graph = nullptr;
  std::string err;
  // A kernel that spins until the abort sets the flag: at most ~10 s on any
  // clock, so that a broken watchdog fails this check instead of hanging.
  auto stuck = [&](CommWatchdog &watchdog, milliseconds timeout) {
    *static_cast<volatile int *>(flag) = 0;
    spinUntil(deviceFlag, 20'000'000'000LL, stream);
    check(cudaGetLastError(), "the spinning kernel's launch");
    check(cudaEventRecord(event, stream), "cudaEventRecord");
    watchdog.track(
        stream, "rank 0: spin failed: ",
        [event, device](std::string &why) {
          return pollCudaEvent(event, device, why);
        },
        timeout, [flag] { *static_cast<volatile int *>(flag) = 1; });
  };
  try {
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaHostAlloc(reinterpret_cast<void **>(&flag), sizeof(int),
                        cudaHostAllocMapped),
          "cudaHostAlloc");
    check(cudaHostGetDevicePointer(reinterpret_cast<void **>(&deviceFlag), flag,
                                   0),
          "cudaHostGetDevicePointer");
    check(cudaMalloc(reinterpret_cast<void **>(&buffer), 256 * sizeof(float)),
          "cudaMalloc");
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
          "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking),
          "cudaStreamCreate");
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
          "cudaEventCreate");
    {
      CommWatchdog watchdog;
      stuck(watchdog, seconds(30));
      check(cudaStreamBeginCapture(capture, cudaStreamCaptureModeGlobal),
            "cudaStreamBeginCapture");
      axpy(1.0f, buffer, buffer, 256, capture);
      std::this_thread::sleep_for(milliseconds(30)); // the watchdog polls
      cudaError_t e = cudaStreamEndCapture(capture, &graph);
      *static_cast<volatile int *>(flag) = 1;
      watchdog.drain();
      if (e != cudaSuccess || !graph)
        throw std::runtime_error(
            std::string("a CUDA graph captured while the watchdog polled "
                        "an event was invalidated: ") +
            cudaGetErrorString(e));
    }
    CommWatchdog watchdog;
    stuck(watchdog, milliseconds(200));
    auto t0 = steady_clock::now();
    check(cudaStreamSynchronize(stream), "the host sync behind the kernel");
    double waited = duration<double>(steady_clock::now() - t0).count();
    std::string failure = watchdog.failure();
    if (failure != "rank 0: spin failed: timed out after 200 ms; a peer rank "
                   "is likely dead or stuck")
      err = "the watchdog did not time out a stuck kernel (it reported '" +
            failure + "')";
    else if (waited > 5.0)
      err = "the watchdog released a host sync only after " +
            std::to_string(waited) + " s (timeout 0.2 s)";
  } catch (const std::exception &e) {
    err = std::string("watchdog check: ") + e.what();
  }
  (void)cudaGetLastError();
  if (graph)
    cudaGraphDestroy(graph);
  if (event)
    cudaEventDestroy(event);
  for (cudaStream_t s : {stream, capture})
    if (s)
      cudaStreamDestroy(s);
  cudaFree(buffer);
  if (flag)
    cudaFreeHost(flag);
  return err;
}
