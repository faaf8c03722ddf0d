//===- CudaIpc.cpp - device memory shared by ranks on one GPU -------------===//

#include "CudaIpc.h"
#include "rlhf/runtime/Error.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDAAllocatorConfig.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unistd.h>

using namespace rlhf;

namespace {

/// The record's layout: where the tensor starts in the exported segment,
/// its shape and strides (at most 2-d: every parameter is), and the
/// allocator's handle for the segment.
struct Record {
  int64_t offset; ///< bytes from the segment's base
  int64_t dims, sizes[2], strides[2];
  int64_t handleBytes;
  char handle[ipc::kRecordBytes - 7 * sizeof(int64_t)];
};
static_assert(sizeof(Record) == ipc::kRecordBytes);

/// Device `index`'s properties (ATen reads them once per device); none
/// without a driver or that device.
std::optional<cudaDeviceProp> properties(int index) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || index < 0 || index >= n)
    return std::nullopt;
  return *at::cuda::getDeviceProperties(c10::DeviceIndex(index));
}

} // namespace

std::string ipc::deviceUuid() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
    return "";
  std::optional<cudaDeviceProp> prop = properties(c10::cuda::current_device());
  if (!prop)
    return "";
  std::string id;
  for (char b : prop->uuid.bytes) {
    char hex[3];
    std::snprintf(hex, sizeof(hex), "%02x", unsigned(uint8_t(b)));
    id += hex;
  }
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "/" + id;
}

std::string ipc::deviceName(int index) {
  std::optional<cudaDeviceProp> prop = properties(index);
  return prop ? prop->name : "";
}

double ipc::deviceMemory(int index) {
  std::optional<cudaDeviceProp> prop = properties(index);
  return prop ? double(prop->totalGlobalMem) : 0.0;
}

bool ipc::expandableSegments() {
  return c10::cuda::CUDACachingAllocator::CUDAAllocatorConfig::
      expandable_segments();
}

std::string ipc::deviceIdentity() {
  if (const char *v = std::getenv("RLHF_CUDA_IPC"); v && std::string(v) == "0")
    return "";
  // An expandable segment's handle grows with the segment (4 bytes per
  // 20 MiB page, 64 with fabric handles): a shard of a real model would not
  // fit a record (kRecordBytes), and the first reallocation would fail.
  if (expandableSegments())
    return "";
  return deviceUuid();
}

void ipc::exportTensor(const at::Tensor &t, uint8_t *out) {
  if (!t.is_cuda())
    throw Error("CUDA IPC: cannot export a tensor on " + t.device().str());
  if (t.dim() > 2)
    throw Error("CUDA IPC: only tensors of up to 2 dimensions are exported");
  Record r{};
  // The allocator shares whole segments: the handle names the segment that
  // holds the storage's block, and the offset finds the block in it.
  c10::cuda::CUDACachingAllocator::ShareableHandle h;
  try {
    h = c10::cuda::CUDACachingAllocator::shareIpcHandle(
        t.storage().mutable_data());
  } catch (const std::exception &e) {
    throw Error("CUDA IPC: cannot share a tensor: " + firstLine(e.what()) +
                " (RLHF_CUDA_IPC=0 moves tensors through host memory instead)");
  }
  if (h.handle.size() > sizeof(r.handle))
    throw Error("CUDA IPC: the allocator's handle has " +
                std::to_string(h.handle.size()) + " bytes, more than " +
                std::to_string(sizeof(r.handle)) +
                " (expandable segments?); set RLHF_CUDA_IPC=0");
  r.offset = int64_t(h.offset) + t.storage_offset() * int64_t(t.element_size());
  r.dims = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) {
    r.sizes[d] = t.size(d);
    r.strides[d] = t.stride(d);
  }
  r.handleBytes = int64_t(h.handle.size());
  std::memcpy(r.handle, h.handle.data(), h.handle.size());
  std::memcpy(out, &r, sizeof(r));
}

at::Tensor ipc::importTensor(const uint8_t *in, const at::TensorOptions &opts) {
  Record r;
  std::memcpy(&r, in, sizeof(r));
  if (r.dims < 0 || r.dims > 2 || r.handleBytes <= 0 ||
      r.handleBytes > int64_t(sizeof(r.handle)))
    throw Error("CUDA IPC: malformed tensor record from a peer");
  std::shared_ptr<void> base;
  try {
    base = c10::cuda::CUDACachingAllocator::getIpcDevPtr(
        std::string(r.handle, size_t(r.handleBytes)));
  } catch (const std::exception &e) {
    throw Error("CUDA IPC: cannot map a peer's memory: " + firstLine(e.what()) +
                " (RLHF_CUDA_IPC=0 moves tensors through host memory instead)");
  }
  std::vector<int64_t> sizes(r.sizes, r.sizes + r.dims),
      strides(r.strides, r.strides + r.dims);
  // The deleter holds the mapping: it closes when the last view goes.
  return at::from_blob(
      static_cast<char *>(base.get()) + r.offset, sizes, strides,
      [base](void *) {}, opts);
}

namespace {
/// The probe's bytes for `tag`: distinct per rank, none zero.
at::Tensor probeBytes(int64_t tag) {
  at::Tensor b = at::empty({64}, at::kByte);
  for (int64_t i = 0; i < b.numel(); ++i)
    b.data_ptr<uint8_t>()[i] = uint8_t(1 + (tag * 37 + i * 11) % 255);
  return b;
}
} // namespace

void ipc::exportProbe(int64_t tag, uint8_t *record) {
  // Peers may map it at any time. Never freed: a static's destructor could
  // run after the caching allocator's at exit.
  static at::Tensor *probe = new at::Tensor(
      probeBytes(tag).to(c10::Device(c10::kCUDA, c10::cuda::current_device())));
  exportTensor(*probe, record); // the copy above has finished: it blocks
}

std::string ipc::checkProbe(const uint8_t *record, int64_t tag) {
  try {
    at::Tensor theirs =
        importTensor(record, at::TensorOptions().dtype(at::kByte).device(
                                 c10::kCUDA, c10::cuda::current_device()));
    if (!theirs.cpu().equal(probeBytes(tag)))
      return "the peer's memory read back wrong";
    return "";
  } catch (const std::exception &e) {
    return e.what();
  }
}

void ipc::synchronize(c10::Device device) {
  if (device.is_cuda())
    c10::cuda::getCurrentCUDAStream(device.index()).synchronize();
}
