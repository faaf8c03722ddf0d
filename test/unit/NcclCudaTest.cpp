//===- NcclCudaTest.cpp - NCCL collectives inside CUDA graphs -------------===//
//
// A one-rank NCCL world on one GPU: its collectives captured by StepGraphs
// (as a tensor-parallel decode step's all-reduces are, with the ranks
// agreeing on the capture over the group) replay with the values of each
// step, and the watchdog, which must not see an event recorded inside the
// capture, stays clean. Skipped without a GPU.
//
//===----------------------------------------------------------------------===//

#include "CommWatchdog.h"
#include "StepGraphs.h"

#include "rlhf/runtime/Communicator.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

using namespace rlhf;

TEST(NcclCuda, CollectivesReplayFromACudaGraph) {
  if (!torch::cuda::is_available())
    GTEST_SKIP() << "no CUDA device";
  setenv("RLHF_CUDA_GRAPHS", "require", 1);
  RendezvousConfig cfg;
  cfg.masterPort = 0;
  cfg.portFile = (std::filesystem::temp_directory_path() /
                  ("rlhf-nccl-graphs-" + std::to_string(getpid())))
                     .string();
  std::unique_ptr<Communicator> comm = createNcclCommunicator(cfg);
  std::filesystem::remove(cfg.portFile);
  ASSERT_TRUE(comm->capturable());
  const c10::Device device(c10::kCUDA, 0);
  auto opts = at::TensorOptions().device(device).dtype(at::kFloat);
  at::Tensor in = at::zeros({4, 8}, opts), out = at::zeros({4, 8}, opts);
  int agreements = 0;
  StepGraphs graphs(device, true,
                    [&, agree = agreeOver(*comm, device)](bool captured) {
                      ++agreements; // generate's agreement, counted
                      return agree(captured);
                    });
  for (int step = 0; step < 4; ++step) {
    in.fill_(float(step + 1));
    graphs.run(0, [&] {
      at::Tensor t = in * 2;
      comm->allReduceSum(t);
      out.copy_(comm->allGather(t) + 1);
    });
    comm->watchQueued("step");
    EXPECT_TRUE(at::equal(out.cpu(), at::full({4, 8}, 2.0f * (step + 1) + 1)))
        << "step " << step;
  }
  EXPECT_TRUE(graphs.active());
  EXPECT_EQ(graphs.captures(), 1);
  EXPECT_EQ(agreements, 1);
  comm->barrier();
  EXPECT_EQ(asyncCommFailure(), "");
  unsetenv("RLHF_CUDA_GRAPHS");
}
