//===- CommTest.cpp - Gloo collectives across real processes --------------===//

#include "ProcessHarness.h"

using namespace rlhf::testing;

namespace {

TEST(GlooComm, AllReduceAcrossTwoProcesses) {
  auto ps = launch(RLHF_COMM_WORKER, 2, {});
  ASSERT_TRUE(waitAll(ps, std::chrono::seconds(60))) << "workers hung";
  for (int r = 0; r < 2; ++r) {
    std::string out = ps[r].output();
    EXPECT_TRUE(exitedOk(ps[r])) << "rank " << r << ":\n" << out;
    EXPECT_NE(out.find("all-reduce 1 ok (sum 3)"), std::string::npos) << out;
    // rank r's first row: sum over ranks of 100 r' + 3 r = 100 + 6 r
    std::string rs =
        "reduce-scatter ok (first " + std::to_string(100 + 6 * r) + ")";
    EXPECT_NE(out.find(rs), std::string::npos) << out;
    EXPECT_NE(out.find("uneven reduce-scatter refused: rank " +
                       std::to_string(r) +
                       "/2: reduce_scatter failed: dim 0 of a 1-d tensor of 7 "
                       "rows does not split into 2 equal parts"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("bucketed all-reduce ok"), std::string::npos) << out;
    EXPECT_NE(out.find("bucketed reduce-scatter ok"), std::string::npos) << out;
    EXPECT_NE(out.find("posted exchange ok"), std::string::npos) << out;
  }
}

// Ranks compare their devices over the store before a backend exists (with
// fewer visible GPUs than ranks on a host, NCCL only if each rank has its
// own), all with the same answer, and the world then joins on that store.
TEST(GlooComm, RanksCompareDevicesOverTheStore) {
  const std::pair<const char *, const char *> cases[] = {
      {"gpu-a,gpu-b", "yes"}, {"gpu-a,gpu-a", "no"}, {"gpu-a,", "no"}};
  for (auto [ids, want] : cases) {
    auto ps = launch(RLHF_COMM_WORKER, 2,
                     {std::string("RLHF_TEST_IDENTITIES=") + ids});
    ASSERT_TRUE(waitAll(ps, std::chrono::seconds(60))) << "workers hung";
    for (int r = 0; r < 2; ++r) {
      std::string out = ps[r].output();
      EXPECT_TRUE(exitedOk(ps[r])) << ids << ", rank " << r << ":\n" << out;
      EXPECT_NE(out.find(std::string("distinct devices ") + want +
                         ", all-reduce over the same store 2"),
                std::string::npos)
          << ids << ", rank " << r << ":\n"
          << out;
    }
  }
}

// A program's start gathers every rank's device over the Gloo world, and
// the ranks on one GPU are weighed together against its memory.
TEST(GlooComm, RanksOnOneGpuFindEachOther) {
  auto ps =
      launch(RLHF_COMM_WORKER, 4, {"RLHF_TEST_IDENTITIES=gpu-a,gpu-b,gpu-a,"});
  ASSERT_TRUE(waitAll(ps, std::chrono::seconds(60))) << "workers hung";
  const char *want[] = {"ranks 0,2, planned 4 GiB", "ranks 1, planned 2 GiB",
                        "ranks 0,2, planned 4 GiB", "ranks 3, planned 4 GiB"};
  for (int r = 0; r < 4; ++r) {
    std::string out = ps[r].output();
    EXPECT_TRUE(exitedOk(ps[r])) << "rank " << r << ":\n" << out;
    EXPECT_NE(out.find("rank " + std::to_string(r) + ": on its GPU " + want[r]),
              std::string::npos)
        << "rank " << r << ":\n"
        << out;
  }
}

TEST(GlooComm, KilledPeerEndsWithAnErrorNotAHang) {
  auto ps = launch(RLHF_COMM_WORKER, 2, {"RLHF_TEST_STALL_RANK=1"});
  // Wait until rank 1 finished the first all-reduce and stalls, then kill it
  // while rank 0 waits in the second.
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (ps[1].output().find("stalled") == std::string::npos) {
    ASSERT_LT(Clock::now(), deadline) << "rank 1 never reached the stall";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(ps[1].pid, SIGKILL);
  // Rank 0 must give up well within the 10 s collective timeout plus slack.
  ASSERT_TRUE(waitAll(ps, std::chrono::seconds(40)))
      << "rank 0 hung after its peer died:\n"
      << ps[0].output();
  EXPECT_TRUE(WIFSIGNALED(ps[1].status));
  EXPECT_FALSE(exitedOk(ps[0]));
  std::string out = ps[0].output();
  EXPECT_NE(out.find("error: rank 0/2: all_reduce failed"), std::string::npos)
      << out;
}

} // namespace
