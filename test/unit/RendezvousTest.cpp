//===- RendezvousTest.cpp - env var parsing -------------------------------===//

#include "rlhf/runtime/Rendezvous.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Store.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <map>

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

/// ranksSharingMemory on every rank of a job at once (threads over one
/// store): rank r publishes ids[r], "offer r" (or errors[r] where set), and
/// fails to map the peers `refuses` lists for it. Each rank's answer and
/// failure text.
std::vector<std::pair<std::vector<bool>, std::string>>
shareAll(const std::vector<std::string> &ids,
         const std::vector<std::string> &errors,
         const std::multimap<int, int> &refuses) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(std::chrono::seconds(20));
  std::vector<std::future<std::pair<std::vector<bool>, std::string>>> ranks;
  for (int r = 0; r < int(ids.size()); ++r)
    ranks.push_back(std::async(std::launch::async, [&, r] {
      rlhf::RendezvousConfig cfg;
      cfg.rank = r;
      cfg.worldSize = int(ids.size());
      std::string offer = "offer " + std::to_string(r), failure;
      auto tryPeer = [&](int peer, const std::vector<uint8_t> &theirs) {
        if (std::string(theirs.begin(), theirs.end()) !=
            "offer " + std::to_string(peer))
          return std::string("wrong offer");
        auto [lo, hi] = refuses.equal_range(r);
        for (auto it = lo; it != hi; ++it)
          if (it->second == peer)
            return std::string("cannot map");
        return std::string();
      };
      std::vector<bool> shares = rlhf::ranksSharingMemory(
          *store, cfg, ids[size_t(r)],
          std::vector<uint8_t>(offer.begin(), offer.end()), errors[size_t(r)],
          tryPeer, &failure);
      return std::make_pair(shares, failure);
    }));
  std::vector<std::pair<std::vector<bool>, std::string>> out;
  for (auto &f : ranks)
    out.push_back(f.get());
  return out;
}

// Ranks share device memory only with ranks on their GPU that could map
// theirs and whose memory they could map: a one-sided failure stops both,
// so the exporter never sends records to a reader expecting bytes.
TEST(Rendezvous, RanksShareMemoryOnlyWhereBothCanMap) {
  // 0-2 on one GPU, 3 on another, 4 on the CPU; rank 2 cannot map rank 0.
  auto all = shareAll({"gpuA", "gpuA", "gpuA", "gpuB", ""},
                      {"", "", "", "", ""}, {{2, 0}});
  EXPECT_EQ(all[0].first,
            (std::vector<bool>{false, true, false, false, false}));
  EXPECT_EQ(all[1].first, (std::vector<bool>{true, false, true, false, false}));
  EXPECT_EQ(all[2].first,
            (std::vector<bool>{false, true, false, false, false}));
  EXPECT_EQ(all[3].first, std::vector<bool>(5, false));
  EXPECT_EQ(all[4].first, std::vector<bool>(5, false));
  // The rank that failed says so; the others met no failure.
  EXPECT_EQ(all[2].second, "rank 0: cannot map");
  EXPECT_EQ(all[0].second, "");
  EXPECT_EQ(all[1].second, "");
}

// A rank that cannot export (expandable segments, a sandbox) shares with
// no one, and its peers say why.
TEST(Rendezvous, ARankWithoutAnOfferSharesWithNoOne) {
  auto all = shareAll({"gpuA", "gpuA", "gpuA"}, {"", "no IPC here", ""}, {});
  EXPECT_EQ(all[0].first, (std::vector<bool>{false, false, true}));
  EXPECT_EQ(all[1].first, std::vector<bool>(3, false));
  EXPECT_EQ(all[2].first, (std::vector<bool>{true, false, false}));
  EXPECT_EQ(all[0].second, "rank 1: cannot share its memory: no IPC here");
  EXPECT_EQ(all[1].second, "rank 1: no IPC here");
}
