//===- rlhf-cuda-check.cpp - report whether the CUDA path works here ------===//
//
//   rlhf-cuda-check selftest   kernel, cuBLAS and NCCL on the first device;
//                              exits 77 (skipped) without a device
//   rlhf-cuda-check refuse     without a device, the NCCL communicator must
//                              refuse with an rlhf::Error, not crash; exits
//                              77 (skipped) where a device is present
//
//===----------------------------------------------------------------------===//

#include "rlhf/cuda/Cuda.h"
#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Error.h"

#include <cstdio>
#include <cstring>

int main(int argc, char **argv) {
  const bool selftest = argc == 2 && std::strcmp(argv[1], "selftest") == 0;
  const bool refuse = argc == 2 && std::strcmp(argv[1], "refuse") == 0;
  if (!selftest && !refuse) {
    std::fprintf(stderr, "usage: rlhf-cuda-check selftest|refuse\n");
    return 2;
  }
  std::string why;
  int n = rlhf::cuda::deviceCount(&why);
  if (refuse) {
    if (n > 0) {
      std::printf("rlhf-cuda-check: SKIP: %d device(s) present\n", n);
      return 77;
    }
    try {
      rlhf::createNcclCommunicator(rlhf::RendezvousConfig{});
      std::printf("rlhf-cuda-check: FAILED: the NCCL backend started without a "
                  "device\n");
      return 1;
    } catch (const rlhf::Error &e) {
      std::printf(
          "rlhf-cuda-check: no device (%s); NCCL backend refuses cleanly: %s\n",
          why.c_str(), e.what());
      return 0;
    }
  }
  if (n == 0) {
    std::printf("rlhf-cuda-check: SKIP: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  std::string err = rlhf::cuda::selfTest();
  std::printf("rlhf-cuda-check: %d device(s); self-test %s%s\n", n,
              err.empty() ? "passed" : "FAILED: ", err.c_str());
  return err.empty() ? 0 : 1;
}
