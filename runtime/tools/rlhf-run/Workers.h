//===- Workers.h - a launcher's worker processes ----------------*- C++ -*-===//
//
// The workers rlhf-run spawns, their stdout and stderr read line by line
// and prefixed with the rank, and how a worker's end is told.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUN_WORKERS_H
#define RLHF_RUN_WORKERS_H

#include "llvm/ADT/StringRef.h"

#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace rlhfrun {

struct Stream {
  int fd = -1;
  std::string pending; // bytes after the last newline
  bool toStderr = false;
};

struct Worker {
  int rank = 0;
  unsigned localRank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Stream out, err;
  std::string firstError; ///< its first stderr line saying "error:"
};

/// Error lines that say the same on several ranks (every rank checks its
/// arguments) are printed once; the rest are counted here, by the rank
/// that printed the line.
struct RepeatedErrors {
  /// The line with the printing rank's number as "rank *".
  std::vector<std::pair<std::string, int>> printed;
  /// For each entry of `printed`, the ranks whose same line was held back.
  std::vector<std::vector<int>> heldBack;
};

/// The variables a worker gets on top of the launcher's environment.
using WorkerEnv = std::vector<std::pair<const char *, std::string>>;

/// Forks `w`'s process in its own process group, with stdout and stderr on
/// pipes `pump` reads, and execs `argv` (argv[0] looked up as execvp does).
/// False when the pipes or the fork fail; a failed exec ends the child with
/// 127 and a line on its stderr.
bool spawn(Worker &w, const std::vector<std::string> &argv,
           const WorkerEnv &env);

/// Whether execvp could run `program`: a path names an executable regular
/// file, a bare name one on PATH (where an empty entry is the current
/// directory and an unset PATH glibc's default).
bool executable(const std::string &program);

/// Prints one line of a worker's output (after "[rank R] " if `prefix`),
/// unless it is an error line another rank printed already (`repeated`).
void emit(Worker &w, Stream &s, llvm::StringRef line, bool prefix,
          RepeatedErrors &repeated);

/// Reads what is available and prints the complete lines; false at EOF.
bool pump(Worker &w, Stream &s, bool prefix, RepeatedErrors &repeated);

/// "rlhf-run: note: ranks 1, 2 and 3 reported the same error as rank 0"
/// for each error line held back.
void noteRepeatedErrors(const RepeatedErrors &repeated);

/// "exited with code 3", "was killed by signal 9 (Killed)".
std::string describe(int status);

/// The exit code a launcher passes on for a worker's wait status.
int exitCodeOf(int status);

/// Sends `sig` to the process group of every running worker.
void signalAll(std::vector<Worker> &ws, int sig);

} // namespace rlhfrun

#endif // RLHF_RUN_WORKERS_H
