//===- PlanHardware.cpp - the plan's GPU beside the one that runs ---------===//

#include "PlanHardware.h"
#include "CudaIpc.h"
#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Device.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <functional>

using namespace rlhf;

std::string rlhf::hardwareNote(const std::string &planned,
                               const std::string &gpu) {
  if (planned.empty() || gpu.empty())
    return "";
  const std::string preset = hardwarePreset(gpu);
  if (preset == planned)
    return "";
  std::string note = "note: the plan priced " + planned + " GPUs; this is an " +
                     gpu +
                     ", so its times and memory will differ from the plan's";
  if (!preset.empty())
    note += "; `cluster NAME : " + preset + " { ... }` plans for this GPU";
  return note;
}

GpuShare rlhf::gpuShare(int rank, const std::vector<int64_t> &devices,
                        const std::vector<double> &planned) {
  GpuShare share;
  auto plannedOf = [&](size_t r) {
    return r < planned.size() ? planned[r] : 0.0;
  };
  const int64_t mine =
      size_t(rank) < devices.size() ? devices[size_t(rank)] : int64_t(0);
  for (size_t r = 0; r < devices.size(); ++r)
    if (int(r) == rank || (mine != 0 && devices[r] == mine)) {
      share.ranks.push_back(int(r));
      share.plannedBytes += plannedOf(r);
    }
  if (share.ranks.empty()) { // a rank outside `devices`: itself alone
    share.ranks.push_back(rank);
    share.plannedBytes = plannedOf(size_t(rank));
  }
  return share;
}

std::string rlhf::memoryWarning(const GpuShare &share, const std::string &gpu,
                                double gpuBytes) {
  const double planned = share.plannedBytes;
  if (share.ranks.empty() || planned <= 0 || gpuBytes <= 0 ||
      planned <= gpuBytes)
    return "";
  char text[640];
  const double gib = double(1 << 30);
  const char *advice = "expect an out-of-memory error, and plan for this "
                       "GPU's memory (the cluster's hardware, or more GPUs)";
  if (share.ranks.size() == 1) {
    std::snprintf(text, sizeof(text),
                  "warning: rank %d: the plan puts %.1f GiB on this rank's "
                  "GPU, more than the %.1f GiB of this %s; %s",
                  share.ranks[0], planned / gib, gpuBytes / gib, gpu.c_str(),
                  advice);
    return text;
  }
  std::string ranks;
  for (int r : share.ranks)
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  std::snprintf(text, sizeof(text),
                "warning: ranks %s share one %s and the plan puts %.1f GiB "
                "on them, more than its %.1f GiB; %s",
                ranks.c_str(), gpu.c_str(), planned / gib, gpuBytes / gib,
                advice);
  return text;
}

int64_t rlhf::deviceIdOf(const std::string &identity) {
  if (identity.empty())
    return 0;
  const int64_t id = int64_t(std::hash<std::string>()(identity));
  return id == 0 ? 1 : id; // 0 means the CPU
}

int64_t rlhf::deviceId(c10::Device device) {
  return device.is_cuda() ? deviceIdOf(ipc::deviceUuid()) : 0;
}

std::vector<int64_t> rlhf::gatherDevices(Communicator &world, int64_t mine) {
  std::vector<int64_t> devices(size_t(world.size()), 0);
  devices[size_t(world.rank())] = mine;
  if (std::string(world.backendName()) != "gloo")
    return devices;
  at::Tensor all = world.allGather(at::tensor({mine}, at::kLong)).contiguous();
  const int64_t *d = all.data_ptr<int64_t>();
  return std::vector<int64_t>(d, d + all.numel());
}

std::string rlhf::planFitWarning(Communicator &world, c10::Device device,
                                 const std::vector<double> &planned) {
  std::vector<int64_t> devices = gatherDevices(world, deviceId(device));
  if (!device.is_cuda())
    return "";
  GpuShare share = gpuShare(world.rank(), devices, planned);
  if (share.ranks.front() != world.rank())
    return "";
  return memoryWarning(share, deviceName(device), deviceMemoryBytes(device));
}
