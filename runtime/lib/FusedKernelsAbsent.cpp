//===- FusedKernelsAbsent.cpp - fused kernels of a build without CUDA -----===//

#include "FusedKernels.h"

using namespace rlhf::fused;

namespace {
const char *const kAbsent = "this runtime was built without CUDA kernels";
} // namespace

bool rlhf::fused::haveKernels() { return false; }

const char *rlhf::fused::launchSwiGluForward(Dtype, int, const SwiGluArgs &,
                                             void *) {
  return kAbsent;
}
const char *rlhf::fused::launchSwiGluBackward(Dtype, int, const SwiGluArgs &,
                                              void *) {
  return kAbsent;
}
const char *rlhf::fused::launchRotary(Dtype, int, const RotaryArgs &, void *) {
  return kAbsent;
}

const char *rlhf::fused::launchCopies(int, const CopyArgs &, void *) {
  return kAbsent;
}
