//===- rlhf-cuda-check.cpp - report whether the CUDA path works here ------===//

#include "rlhf/cuda/Cuda.h"

#include <cstdio>

int main() {
  std::string why;
  int n = rlhf::cuda::deviceCount(&why);
  if (n == 0) {
    std::printf("rlhf-cuda-check: built with CUDA; no device here (%s)\n",
                why.c_str());
    return 0;
  }
  std::string err = rlhf::cuda::selfTest();
  std::printf("rlhf-cuda-check: %d device(s); self-test %s%s\n", n,
              err.empty() ? "passed" : "FAILED: ", err.c_str());
  return err.empty() ? 0 : 1;
}
