//===- PlanHardwareTest.cpp - the plan's GPU beside the one that runs -----===//

#include "PlanHardware.h"
#include "rlhf/runtime/Device.h"

#include <gtest/gtest.h>

using namespace rlhf;

// The names nvidia-smi gives, as the driver reports them.
TEST(PlanHardware, PresetsFollowTheDriversNames) {
  EXPECT_EQ(hardwarePreset("NVIDIA H100 80GB HBM3"), "H100_SXM");
  EXPECT_EQ(hardwarePreset("NVIDIA H800"), "H100_SXM");
  EXPECT_EQ(hardwarePreset("NVIDIA H200"), "H200");
  EXPECT_EQ(hardwarePreset("NVIDIA A100-SXM4-80GB"), "A100_80GB");
  EXPECT_EQ(hardwarePreset("NVIDIA A100-SXM4-40GB"), "A100_40GB");
  // Other clocks and bandwidths than the SXM parts the presets describe.
  EXPECT_EQ(hardwarePreset("NVIDIA H100 PCIe"), "");
  EXPECT_EQ(hardwarePreset("NVIDIA H100 NVL"), "");
  EXPECT_EQ(hardwarePreset("NVIDIA L4"), "");
  EXPECT_EQ(hardwarePreset(""), "");
}

TEST(PlanHardware, NoteOnlyWhenTheGpuIsNotThePlans) {
  EXPECT_EQ(hardwareNote("H100_SXM", "NVIDIA H100 80GB HBM3"), "");
  EXPECT_EQ(hardwareNote("H100_SXM", ""), "");    // the CPU
  EXPECT_EQ(hardwareNote("", "NVIDIA H200"), ""); // an object without it
  EXPECT_EQ(hardwareNote("H100_SXM", "NVIDIA H200"),
            "note: the plan priced H100_SXM GPUs; this is an NVIDIA H200, so "
            "its times and memory will differ from the plan's; `cluster NAME "
            ": H200 { ... }` plans for this GPU");
  // A program's own hardware block, and a GPU no preset describes.
  std::string n = hardwareNote("cpu", "NVIDIA H100 PCIe");
  EXPECT_NE(n.find("priced cpu GPUs; this is an NVIDIA H100 PCIe,"),
            std::string::npos)
      << n;
  EXPECT_EQ(n.find("cluster NAME"), std::string::npos) << n;
}

TEST(PlanHardware, WarnsOnlyWhenThePlanDoesNotFit) {
  const double gib = double(1 << 30);
  auto alone = [](int rank, double bytes) { return GpuShare{{rank}, bytes}; };
  EXPECT_EQ(
      memoryWarning(alone(3, 30 * gib), "NVIDIA A100-SXM4-40GB", 40 * gib), "");
  EXPECT_EQ(memoryWarning(alone(3, 50 * gib), "", 0), ""); // the CPU
  EXPECT_EQ(memoryWarning(alone(3, 0), "NVIDIA A100-SXM4-40GB", 40 * gib), "");
  std::string w =
      memoryWarning(alone(3, 52.25 * gib), "NVIDIA A100-SXM4-40GB", 39.5 * gib);
  EXPECT_EQ(
      w.rfind("warning: rank 3: the plan puts 52.2 GiB on this rank's "
              "GPU, more than the 39.5 GiB of this NVIDIA A100-SXM4-40GB;",
              0),
      0u)
      << w;
}

// Ranks on one GPU (several processes sharing it over Gloo) are weighed
// together: each alone fits, all four do not.
TEST(PlanHardware, RanksSharingAGpuAreSummed) {
  const double gib = double(1 << 30);
  const std::vector<int64_t> devices{7, 9, 7, 7, 0};
  const std::vector<double> planned{40 * gib, 50 * gib, 30 * gib, 10 * gib,
                                    99 * gib};
  GpuShare s = gpuShare(2, devices, planned);
  EXPECT_EQ(s.ranks, (std::vector<int>{0, 2, 3}));
  EXPECT_DOUBLE_EQ(s.plannedBytes, 80 * gib);
  EXPECT_EQ(gpuShare(1, devices, planned).ranks, std::vector<int>{1});
  // A CPU rank (device 0) shares with no one, not even other CPU ranks.
  EXPECT_EQ(gpuShare(4, devices, planned).ranks, std::vector<int>{4});
  EXPECT_EQ(gpuShare(4, {0, 0, 0, 0, 0}, planned).ranks, std::vector<int>{4});
  // A plan shorter than the world counts the missing ranks as nothing.
  EXPECT_DOUBLE_EQ(gpuShare(3, devices, {40 * gib}).plannedBytes, 40 * gib);

  EXPECT_EQ(memoryWarning(s, "NVIDIA H100 80GB HBM3", 80.5 * gib), "");
  std::string w = memoryWarning(s, "NVIDIA A100-SXM4-40GB", 39.5 * gib);
  EXPECT_EQ(w.rfind("warning: ranks 0, 2, 3 share one NVIDIA A100-SXM4-40GB "
                    "and the plan puts 80.0 GiB on them, more than its "
                    "39.5 GiB;",
                    0),
            0u)
      << w;
}

// On the GPU (gpu.model-on-cuda runs it there): the driver's name and
// memory are read.
TEST(PlanHardwareCuda, ReadsTheDevice) {
  if (cudaDeviceCount() == 0) {
    EXPECT_EQ(deviceName(c10::Device(c10::kCPU)), "");
    EXPECT_EQ(deviceMemoryBytes(c10::Device(c10::kCPU)), 0.0);
    GTEST_SKIP() << "no CUDA device";
  }
  c10::Device gpu(c10::kCUDA, 0);
  EXPECT_FALSE(deviceName(gpu).empty());
  EXPECT_GT(deviceMemoryBytes(gpu), 1e9);
}
