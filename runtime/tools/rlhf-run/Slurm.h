//===- Slurm.h - launch settings from a Slurm job step ----------*- C++ -*-===//
//
// Under `srun --ntasks-per-node=1 rlhf-run -n 8 PROGRAM`, each node's
// launcher learns its node rank, the number of nodes and node 0's host from
// the step's variables, as torchrun users otherwise script by hand.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUN_SLURM_H
#define RLHF_RUN_SLURM_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace rlhfrun {

/// The first host of a Slurm host list: "gpu[01-04,07],login1" -> "gpu01",
/// "rack[2-3]-n[008-016]" -> "rack2-n008". Zero padding is kept as written.
/// Fails, saying why, on an empty list, unbalanced brackets or a range that
/// is not `digits` or `lo-hi`.
llvm::Expected<std::string> firstSlurmHost(llvm::StringRef list);

struct SlurmStep {
  unsigned nnodes = 1;
  unsigned nodeRank = 0;
  std::string masterAddr;
  unsigned masterPort = 0; ///< 0: neither MASTER_PORT nor SLURM_JOB_ID
  std::string portFrom;    ///< the variable masterPort came from
  /// What came from which variable, for the one line rlhf-run prints.
  std::string summary;
};

/// Reads the launch settings of the Slurm job step this process runs in.
/// Returns std::nullopt outside a step (no SLURM_STEP_NODELIST: a batch
/// script itself is no step, so `rlhf-run` there stays single-node), and an
/// error when the variables are malformed or the step runs more than one
/// task per node. The port is MASTER_PORT when set, else derived from the
/// job and step ids, so every node computes the same one.
llvm::Expected<std::optional<SlurmStep>> readSlurmStep();

} // namespace rlhfrun

#endif // RLHF_RUN_SLURM_H
