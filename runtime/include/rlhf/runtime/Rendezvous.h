//===- Rendezvous.h - process identity from launcher env vars ---*- C++ -*-===//
//
// Reads the torchrun-style variables (MASTER_ADDR, MASTER_PORT, RANK,
// WORLD_SIZE, LOCAL_RANK) so rlhf-run, srun wrappers and torchrun all work.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_RENDEZVOUS_H
#define RLHF_RUNTIME_RENDEZVOUS_H

#include <chrono>
#include <cstdint>
#include <string>

namespace rlhf {

struct RendezvousConfig {
  std::string masterAddr = "127.0.0.1";
  uint16_t masterPort = 29500;
  /// With masterPort 0: where rank 0 publishes the port it was given
  /// (RLHF_RENDEZVOUS_FILE, set by rlhf-run).
  std::string portFile;
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  /// torchrun's agent already hosts the store at MASTER_ADDR:MASTER_PORT
  /// (TORCHELASTIC_USE_AGENT_STORE=True): every rank, rank 0 too, joins it.
  bool agentStore = false;
  /// Every collective and store wait gives up after this long.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  /// A process whose poll or abort of a communicator has not returned after
  /// this long ends itself rather than hang (RLHF_WATCHDOG_STALL_S).
  std::chrono::milliseconds watchdogStall{std::chrono::seconds(120)};

  /// Ranks on this host (LOCAL_WORLD_SIZE, else WORLD_SIZE).
  int localWorldSize = 1;

  /// Builds the config from the environment. Throws rlhf::Error naming the
  /// variable when one is missing or malformed. RLHF_COMM_TIMEOUT_MS and
  /// RLHF_WATCHDOG_STALL_S, when set, override the timeout and the stall
  /// limit. MASTER_PORT=0 needs RLHF_RENDEZVOUS_FILE.
  static RendezvousConfig fromEnv();
};

/// Gives this rank its share of the host's cores for intra-op threads:
/// cores / localWorldSize, at least 1, unless OMP_NUM_THREADS says otherwise.
/// LibTorch's default (every core in every rank) oversubscribes a host that
/// runs several ranks, and its spinning threads then slow a step several-fold.
void setHostThreads(const RendezvousConfig &cfg);

} // namespace rlhf

#endif // RLHF_RUNTIME_RENDEZVOUS_H
