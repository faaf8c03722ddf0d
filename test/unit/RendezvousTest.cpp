//===- RendezvousTest.cpp - env var parsing -------------------------------===//

#include "rlhf/runtime/Rendezvous.h"
#include "rlhf/runtime/Error.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace {

void clearRendezvousEnv() {
  for (const char *v : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
                        "LOCAL_RANK", "RLHF_COMM_TIMEOUT_MS",
                        "RLHF_WATCHDOG_STALL_S", "RLHF_RENDEZVOUS_FILE"})
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

/// A job's MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK (RANK left unset
/// when null).
void setJob(const char *addr, const char *port, const char *world,
            const char *rank) {
  setenv("MASTER_ADDR", addr, 1);
  setenv("MASTER_PORT", port, 1);
  setenv("WORLD_SIZE", world, 1);
  if (rank)
    setenv("RANK", rank, 1);
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
  setJob("10.0.0.7", "31337", "8", "5");
  setenv("LOCAL_RANK", "1", 1);
  setenv("RLHF_COMM_TIMEOUT_MS", "1500", 1);
  setenv("RLHF_WATCHDOG_STALL_S", "30", 1);
  auto c = rlhf::RendezvousConfig::fromEnv();
  EXPECT_EQ(c.masterAddr, "10.0.0.7");
  EXPECT_EQ(c.masterPort, 31337);
  EXPECT_EQ(c.worldSize, 8);
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.localRank, 1);
  EXPECT_EQ(c.timeout.count(), 1500);
  EXPECT_EQ(c.watchdogStall.count(), 30000);
}

TEST(Rendezvous, AStallLimitOfZeroNamesTheVariable) {
  EnvGuard g;
  EXPECT_EQ(rlhf::RendezvousConfig::fromEnv().watchdogStall.count(), 120000);
  setenv("RLHF_WATCHDOG_STALL_S", "0", 1);
  std::string err = fromEnvError();
  EXPECT_NE(err.find("RLHF_WATCHDOG_STALL_S='0' is not an integer in [1, "),
            std::string::npos)
      << err;
}

TEST(Rendezvous, RankOutOfRangeNamesTheVariable) {
  EnvGuard g;
  setJob("127.0.0.1", "29500", "2", "2");
  std::string err = fromEnvError();
  EXPECT_NE(err.find("RANK='2'"), std::string::npos) << err;
}

TEST(Rendezvous, MissingRankIsAnError) {
  EnvGuard g;
  setJob("127.0.0.1", "29500", "2", nullptr);
  EXPECT_THROW(rlhf::RendezvousConfig::fromEnv(), rlhf::Error);
}

TEST(Rendezvous, PortZeroNeedsARendezvousFile) {
  EnvGuard g;
  setJob("127.0.0.1", "0", "2", "1");
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
