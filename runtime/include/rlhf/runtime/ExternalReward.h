//===- ExternalReward.h - rewards from worker processes ---------*- C++ -*-===//
//
// `script_reward` scores samples with the user's own program: a command run
// as a pool of long-lived worker processes that each read one JSON request
// per line on stdin and write one JSON reply per line, `{"score": x}`, on
// stdout. Torch-free POSIX: fork/exec of `/bin/sh -c COMMAND`, pipes, poll.
//
// Workers start at the first score() and serve every later one. Each runs
// in a process group of its own, so a stop reaches what its shell started.
// A stop closes its stdin, then sends SIGTERM and finally SIGKILL to the
// group, `grace` seconds apart, and reaps the worker: no zombies.
//
// A worker that exits, closes its stdout, exceeds the timeout or replies
// with anything but one JSON object holding a finite number "score" (and,
// if it has a "row", the request's index) fails the request. With a declared
// default score the row gets that score, a warning is printed and the worker is
// restarted; without one, score() stops every worker and throws rlhf::Error
// naming the command, the row and the reason.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_EXTERNALREWARD_H
#define RLHF_RUNTIME_EXTERNALREWARD_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace rlhf {

struct ExternalRewardOptions {
  std::string command;   ///< run as `/bin/sh -c command`
  std::string directory; ///< its working directory; "" keeps the caller's
  int64_t workers = 4;   ///< processes, and so requests in flight
  double timeout = 30;   ///< seconds one request may take
  /// The score of a failed request (with a warning); unset: failures throw.
  std::optional<double> fallback;
  /// Seconds between closing a worker's stdin, SIGTERM and SIGKILL.
  double grace = 2;
  /// Where warnings go; unset: one line on stderr each.
  std::function<void(const std::string &)> warn;
  /// What leads each warning's text, such as the call's place in its file.
  std::string where;
  /// Called every `heartbeatInterval` seconds while score() waits, so that
  /// a caller can tell peers it is alive (collectives time out).
  std::function<void()> heartbeat;
  double heartbeatInterval = 10;
};

class ExternalRewardPool {
public:
  explicit ExternalRewardPool(ExternalRewardOptions options);
  /// Stops the workers (see shutdown).
  ~ExternalRewardPool();

  /// The scores of `requests` (one JSON object each, without a newline), in
  /// order; request i is "row i" in messages. Keeps `workers` requests in
  /// flight and starts the workers that are not running.
  std::vector<double> score(const std::vector<std::string> &requests);

  /// Closes every worker's stdin and waits `grace` seconds for it to exit,
  /// then SIGTERM, then SIGKILL; reaps them all. score() starts them again.
  void shutdown();

  /// Process ids of the running workers (for tests and diagnostics).
  std::vector<int> pids() const;
  /// Workers restarted after a failed request, over the pool's life.
  int64_t restarts() const { return restarted; }

  ExternalRewardPool(const ExternalRewardPool &) = delete;
  ExternalRewardPool &operator=(const ExternalRewardPool &) = delete;

  struct Worker; ///< one process and its pipes (ExternalReward.cpp)

private:
  void start(Worker &w);
  /// Stops `ws` together: stdin closed (when `closeStdin`), SIGTERM, SIGKILL.
  void stop(const std::vector<Worker *> &ws, bool closeStdin);
  /// Handles a failed request of `w`: the fallback score and a restart, or
  /// an rlhf::Error after stopping every worker.
  void fail(Worker &w, const std::string &reason, std::vector<double> &out);
  std::string describe() const;

  ExternalRewardOptions opts;
  std::vector<Worker> workers;
  int64_t restarted = 0;
};

} // namespace rlhf

#endif // RLHF_RUNTIME_EXTERNALREWARD_H
