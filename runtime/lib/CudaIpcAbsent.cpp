//===- CudaIpcAbsent.cpp - no device memory sharing without CUDA ----------===//

#include "CudaIpc.h"
#include "rlhf/runtime/Error.h"

using namespace rlhf;

std::string ipc::deviceUuid() { return ""; }

std::string ipc::deviceName(int) { return ""; }

double ipc::deviceMemory(int) { return 0; }

std::string ipc::deviceIdentity() { return ""; }

bool ipc::expandableSegments() { return false; }

void ipc::exportTensor(const at::Tensor &, uint8_t *) {
  throw Error("CUDA IPC: this runtime was built without CUDA");
}

at::Tensor ipc::importTensor(const uint8_t *, const at::TensorOptions &) {
  throw Error("CUDA IPC: this runtime was built without CUDA");
}

void ipc::exportProbe(int64_t, uint8_t *) {
  throw Error("CUDA IPC: this runtime was built without CUDA");
}

std::string ipc::checkProbe(const uint8_t *, int64_t) {
  return "this runtime was built without CUDA";
}

void ipc::synchronize(c10::Device) {}
