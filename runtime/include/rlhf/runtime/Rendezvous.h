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
  /// Every collective and store wait gives up after this long.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};

  /// Builds the config from the environment. Throws rlhf::Error naming the
  /// variable when one is missing or malformed. RLHF_COMM_TIMEOUT_MS, when
  /// set, overrides the timeout. MASTER_PORT=0 needs RLHF_RENDEZVOUS_FILE.
  static RendezvousConfig fromEnv();
};

} // namespace rlhf

#endif // RLHF_RUNTIME_RENDEZVOUS_H
