//===- Supervise.h - watching a launcher's workers --------------*- C++ -*-===//
//
// The loop that runs while a launcher's workers do (Supervise.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUN_SUPERVISE_H
#define RLHF_RUN_SUPERVISE_H

#include "NodeLink.h"
#include "Workers.h"

#include <vector>

namespace rlhfrun {

struct SuperviseConfig {
  unsigned nodeRank = 0; ///< this node's index
  bool multi = false;    ///< a job of several nodes
  unsigned graceSeconds = 5; ///< SIGTERM to SIGKILL when stopping
  bool prefix = true;        ///< "[rank R] " before each output line
  int signalFd = -1;         ///< the read end of the launcher's signal pipe
};

/// Relays the running `workers`' output and watches them, the launcher's
/// signals (one byte each on `signalFd`) and, across nodes, `link` (null on
/// one node) until the job ends. A failed worker here or elsewhere is named
/// with its error, and the rest are stopped. Returns rlhf-run's exit code:
/// 0, the failing worker's code, or 128 + a signal that stopped the job.
int supervise(std::vector<Worker> &workers, NodeLink *link,
              const SuperviseConfig &c);

} // namespace rlhfrun

#endif // RLHF_RUN_SUPERVISE_H
