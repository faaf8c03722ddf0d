//===- PlanHardware.h - the plan's GPU beside the one that runs -*- C++ -*-===//
//
// A plan prices its cluster's hardware (a preset such as H100_SXM, or the
// program's own `hardware` block). Run on another GPU, its times are not the
// plan's error, and a plan for a larger GPU may not fit: a run says so at its
// start rather than after an out-of-memory error mid-step.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_PLANHARDWARE_H
#define RLHF_RUNTIME_PLANHARDWARE_H

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rlhf {

/// A note when GPU `gpu` (the driver's name) is not the plan's hardware
/// `planned`; empty when it is, or when either is unknown.
std::string hardwareNote(const std::string &planned, const std::string &gpu);

/// The ranks that compute on one GPU (ascending) and what the plan puts on
/// them together.
struct GpuShare {
  std::vector<int> ranks;
  double plannedBytes = 0;
};

/// Rank `rank`'s share of its GPU, from every rank's device (`devices`,
/// equal for ranks on one GPU, 0 on the CPU) and planned peak (`planned`).
GpuShare gpuShare(int rank, const std::vector<int64_t> &devices,
                  const std::vector<double> &planned);

/// A warning when the plan puts more on this GPU, over all the ranks in
/// `share`, than it holds; empty when it fits or either size is unknown (0).
std::string memoryWarning(const GpuShare &share, const std::string &gpu,
                          double gpuBytes);

class Communicator;

/// A device identity (host/UUID, as ipc::deviceUuid gives it) as
/// gatherDevices takes it: a hash, equal for ranks on one GPU; 0 for an
/// empty identity (the CPU).
int64_t deviceIdOf(const std::string &identity);

/// This process's device as gatherDevices takes it; 0 on the CPU.
int64_t deviceId(c10::Device device);

/// Every rank's deviceId, `mine` being this rank's. Under Gloo, ranks may
/// share a GPU, so the world gathers them (collective: every rank calls
/// it); under NCCL, which refuses two ranks on one GPU, the others are 0.
std::vector<int64_t> gatherDevices(Communicator &world, int64_t mine);

/// memoryWarning for this rank's GPU with every rank on it counted
/// (gatherDevices: collective). Empty on the CPU, and for every rank of a
/// group but its first, so that a group warns once.
std::string planFitWarning(Communicator &world, c10::Device device,
                           const std::vector<double> &planned);

} // namespace rlhf

#endif // RLHF_RUNTIME_PLANHARDWARE_H
