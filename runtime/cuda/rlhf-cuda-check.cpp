//===- rlhf-cuda-check.cpp - report whether the CUDA path works here ------===//
//
// With a GPU: runs the kernel/cuBLAS/NCCL self-test. Without one: checks that
// the NCCL communicator refuses cleanly (an rlhf::Error, not a crash).
//
//===----------------------------------------------------------------------===//

#include "rlhf/cuda/Cuda.h"
#include "rlhf/cuda/NcclCommunicator.h"
#include "rlhf/runtime/Error.h"

#include <cstdio>

int main() {
  std::string why;
  int n = rlhf::cuda::deviceCount(&why);
  if (n == 0) {
    std::printf("rlhf-cuda-check: built with CUDA; no device here (%s)\n", why.c_str());
    try {
      rlhf::createNcclCommunicator(rlhf::RendezvousConfig{});
      std::printf("rlhf-cuda-check: FAILED: the NCCL backend started without a device\n");
      return 1;
    } catch (const rlhf::Error &e) {
      std::printf("rlhf-cuda-check: NCCL backend refuses cleanly: %s\n", e.what());
      return 0;
    }
  }
  std::string err = rlhf::cuda::selfTest();
  std::printf("rlhf-cuda-check: %d device(s); self-test %s%s\n", n,
              err.empty() ? "passed" : "FAILED: ", err.c_str());
  return err.empty() ? 0 : 1;
}
