//===- CommWatchdog.h - timeouts for collectives in flight ------*- C++ -*-===//
//
// An NCCL collective is queued on a CUDA stream and the host moves on, so a
// dead peer shows up not in the collective's call but later, as a kernel
// that never ends, behind which any host sync (`.item()`, a copy to the
// host) blocks for ever. Waiting on the host after each collective keeps the
// timeout on the calling thread, but drains the launch queue at every
// tensor-parallel all-reduce. CommWatchdog keeps the timeout without the
// wait, as ProcessGroupNCCL's watchdog does: a thread polls the operations
// in flight and, when one fails or outlives its timeout, records why and
// runs the operation's abort, which makes the stuck kernels (and so every
// host sync behind them) return. The calling thread then throws the
// recorded error at its next communicator call (check()).
//
// CUDA-free, so that the logic is tested on the CPU; the NCCL backend
// supplies polls over CUDA events and an abort over its communicators.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_COMMWATCHDOG_H
#define RLHF_RUNTIME_COMMWATCHDOG_H

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rlhf {

class CommWatchdog {
public:
  enum class State { Pending, Done, Failed };
  /// Asks whether an operation has finished; on Failed, says why in `why`.
  /// Called on the watchdog's thread.
  using Poll = std::function<State(std::string &why)>;

  explicit CommWatchdog(
      std::chrono::microseconds tick = std::chrono::milliseconds(2));
  ~CommWatchdog();
  CommWatchdog(const CommWatchdog &) = delete;
  CommWatchdog &operator=(const CommWatchdog &) = delete;

  /// Watches an operation queued on `lane` (a stream: its operations end in
  /// the order they were queued, so only the oldest is polled). `what` opens
  /// the error ("rank 3: all_reduce failed: "). On failure or after
  /// `timeout`, `abort` runs once on the watchdog's thread; no later
  /// operation is polled, since an abort ends them all.
  void track(const void *lane, std::string what, Poll poll,
             std::chrono::milliseconds timeout, std::function<void()> abort);

  /// Throws, as an rlhf::Error, the failure recorded, if any.
  void check() const;
  /// The failure recorded, or empty.
  std::string failure() const;
  /// Operations not yet seen to end.
  int64_t inFlight() const;
  /// Waits until every operation has been seen to end; throws a failure.
  void drain();

  /// The process's watchdog, which the NCCL backend uses.
  static CommWatchdog &process();

private:
  struct Op {
    std::string what;
    Poll poll;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds timeout;
    std::function<void()> abort;
  };
  void loop();
  /// Polls the oldest operations of each lane, moving those that ended
  /// into `ended`; returns a failed one's abort.
  std::function<void()> sweep(std::vector<Op> &ended);

  std::chrono::microseconds tick;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<const void *, std::deque<Op>> lanes;
  int64_t pending = 0;
  std::string failed;
  bool stop = false;
  std::thread thread; ///< started by the first track()
};

/// The first failure a backend recorded away from its caller's thread (the
/// NCCL watchdog's), or empty. A rank that dies of a later error reports
/// this one as the cause.
std::string asyncCommFailure();

/// Whether any communicator of the process was aborted (by the watchdog, or
/// by a call that failed or timed out). An aborted NCCL communicator is
/// freed, so what still refers to it (a CUDA graph's captured collectives)
/// must not be replayed or destroyed.
bool communicatorAborted();
/// Records that one was; the backend calls it as it aborts.
void noteCommunicatorAborted();

} // namespace rlhf

#endif // RLHF_RUNTIME_COMMWATCHDOG_H
