//===- RendezvousTest.cpp - env var parsing -------------------------------===//

#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Rendezvous.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace {

void clearRendezvousEnv() {
  for (const char *v :
       {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
        "RLHF_COMM_TIMEOUT_MS", "RLHF_RENDEZVOUS_FILE"})
    unsetenv(v);
}

/// The message fromEnv() throws (empty when it does not).
std::string fromEnvError() {
  try {
    rlhf::RendezvousConfig::fromEnv();
  } catch (const rlhf::Error &e) {
    return e.what();
  }
  return "";
}

// Each test starts and ends with a clean rendezvous environment.
struct EnvGuard {
  EnvGuard() { clearRendezvousEnv(); }
  ~EnvGuard() { clearRendezvousEnv(); }
};

TEST(Rendezvous, SingleProcessDefaults) {
  EnvGuard g;
  auto c = rlhf::RendezvousConfig::fromEnv();
  EXPECT_EQ(c.rank, 0);
  EXPECT_EQ(c.worldSize, 1);
}

TEST(Rendezvous, ReadsTorchrunVariables) {
  EnvGuard g;
  setenv("MASTER_ADDR", "10.0.0.7", 1);
  setenv("MASTER_PORT", "31337", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("RANK", "5", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("RLHF_COMM_TIMEOUT_MS", "1500", 1);
  auto c = rlhf::RendezvousConfig::fromEnv();
  EXPECT_EQ(c.masterAddr, "10.0.0.7");
  EXPECT_EQ(c.masterPort, 31337);
  EXPECT_EQ(c.worldSize, 8);
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.localRank, 1);
  EXPECT_EQ(c.timeout.count(), 1500);
}

TEST(Rendezvous, RankOutOfRangeNamesTheVariable) {
  EnvGuard g;
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29500", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "2", 1);
  std::string err = fromEnvError();
  EXPECT_NE(err.find("RANK='2'"), std::string::npos) << err;
}

TEST(Rendezvous, MissingRankIsAnError) {
  EnvGuard g;
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29500", 1);
  EXPECT_THROW(rlhf::RendezvousConfig::fromEnv(), rlhf::Error);
}

TEST(Rendezvous, PortZeroNeedsARendezvousFile) {
  EnvGuard g;
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "1", 1);
  std::string err = fromEnvError();
  EXPECT_NE(err.find("MASTER_PORT=0 needs RLHF_RENDEZVOUS_FILE"),
            std::string::npos)
      << err;
  setenv("RLHF_RENDEZVOUS_FILE", "/tmp/x/port", 1);
  auto c = rlhf::RendezvousConfig::fromEnv();
  EXPECT_EQ(c.masterPort, 0);
  EXPECT_EQ(c.portFile, "/tmp/x/port");
}

} // namespace
