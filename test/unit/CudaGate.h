//===- CudaGate.h - skip a CUDA test run without a device -------*- C++ -*-===//
//
// The layout tests run again with RLHF_DEVICE=cuda under the `gpu` ctest
// label; without a visible CUDA device the whole run is a skip: exit 77, as
// ctest expects.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_TEST_UNIT_CUDAGATE_H
#define RLHF_TEST_UNIT_CUDAGATE_H

#include "rlhf/runtime/Device.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace rlhf::testing {

inline const bool kCudaGate = [] {
  const char *d = std::getenv("RLHF_DEVICE");
  if (d && std::string(d) == "cuda" && rlhf::cudaDeviceCount() == 0) {
    std::printf("SKIP: RLHF_DEVICE=cuda but no CUDA device is visible\n");
    std::exit(77);
  }
  return true;
}();

} // namespace rlhf::testing

#endif // RLHF_TEST_UNIT_CUDAGATE_H
