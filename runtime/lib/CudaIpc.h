//===- CudaIpc.h - device memory shared by ranks on one GPU -----*- C++ -*-===//
//
// Several ranks may share one GPU (tests of multi-rank layouts on one
// device). Gloo would move their tensors through host memory; with CUDA IPC a
// rank maps a peer's allocation and copies device to device instead, as
// NCCL's peer-to-peer transport does between GPUs. Reallocation uses it to
// read each slice straight from the peer's shard: one copy per byte.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_CUDAIPC_H
#define RLHF_RUNTIME_CUDAIPC_H

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace rlhf::ipc {

/// Bytes of one exported tensor's record, a fixed size so that receivers
/// know what to expect.
constexpr int64_t kRecordBytes = 256;

/// This process's current GPU as "host/UUID", equal for exactly the ranks
/// that share a device (MIG instances of one GPU differ); empty without a
/// CUDA device.
std::string deviceUuid();

/// The name the driver gives CUDA device `index` ("NVIDIA H200", as
/// nvidia-smi shows it); empty without that device.
std::string deviceName(int index);

/// Device `index`'s memory in bytes; 0 without that device.
double deviceMemory(int index);

/// deviceUuid, for sharing memory: empty also with RLHF_CUDA_IPC=0 and
/// under PyTorch's expandable segments (then ranks sharing a GPU move
/// tensors through host memory).
std::string deviceIdentity();

/// Whether PyTorch's caching allocator uses expandable segments
/// (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True).
bool expandableSegments();

/// Writes into `record` (kRecordBytes) what a process on the same GPU needs
/// to map `t`, a tensor of the CUDA caching allocator. The exporter must
/// keep `t` alive and unchanged until the importers are done with it.
void exportTensor(const at::Tensor &t, uint8_t *record);

/// The tensor `record` describes, mapped into this process on `opts`'s
/// device with `opts`'s dtype; the mapping lives as long as the tensor.
at::Tensor importTensor(const uint8_t *record, const at::TensorOptions &opts);

/// A small tensor of this process's GPU, exported into `record`
/// (kRecordBytes) for a peer on the same GPU to test mapping with
/// (checkProbe); its bytes follow from `tag`. It lives as long as the
/// process. Throws where this GPU's memory cannot be shared.
void exportProbe(int64_t tag, uint8_t *record);

/// Maps a peer's probe and reads it back: empty when its bytes are those
/// `tag` gives, else what went wrong (an exception's whole message).
std::string checkProbe(const uint8_t *record, int64_t tag);

/// Waits until the work queued on `device`'s current stream is done.
void synchronize(c10::Device device);

} // namespace rlhf::ipc

#endif // RLHF_RUNTIME_CUDAIPC_H
