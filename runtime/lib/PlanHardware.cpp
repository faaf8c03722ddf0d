//===- PlanHardware.cpp - the plan's GPU beside the one that runs ---------===//

#include "PlanHardware.h"
#include "rlhf/runtime/Device.h"

#include <cstdio>

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

std::string rlhf::memoryWarning(int rank, double plannedBytes,
                                const std::string &gpu, double gpuBytes) {
  if (plannedBytes <= 0 || gpuBytes <= 0 || plannedBytes <= gpuBytes)
    return "";
  char text[512];
  std::snprintf(text, sizeof(text),
                "warning: rank %d: the plan puts %.1f GiB on this rank's GPU, "
                "more than the %.1f GiB of this %s; expect an out-of-memory "
                "error, and plan for this GPU's memory (the cluster's "
                "hardware, or more GPUs)",
                rank, plannedBytes / (1 << 30), gpuBytes / (1 << 30),
                gpu.c_str());
  return text;
}
