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
// The watchdog's own calls can stick too: ncclCommAbort has hung in NCCL
// releases, and a poll can block behind a driver lock. A monitor thread, as
// ProcessGroupNCCL's heartbeat monitor, times every Section (a poll, an
// abort, on any thread) and ends the process when one outlives the stall
// limit, so that the launcher sees a rank die rather than a job hang.
//
// CUDA-free, so that the logic is tested on the CPU; the NCCL backend
// supplies polls over CUDA events and an abort over its communicators.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_COMMWATCHDOG_H
#define RLHF_RUNTIME_COMMWATCHDOG_H

#include "rlhf/runtime/Rendezvous.h"

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
  /// Told, on the monitor's thread, that a Section outlived the stall limit.
  using OnStall = std::function<void(const std::string &message)>;

  explicit CommWatchdog(
      std::chrono::microseconds tick = std::chrono::milliseconds(2),
      std::chrono::milliseconds stallLimit = RendezvousConfig{}.watchdogStall,
      OnStall onStall = endProcess);
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

  /// A call that must return for a failed job to end: a poll, or the abort
  /// of a communicator, on any thread. While one outlives the stall limit,
  /// onStall is told `subject` "has not returned for ..." (once).
  class Section {
  public:
    Section(CommWatchdog &w, std::string subject);
    ~Section();
    Section(const Section &) = delete;
    Section &operator=(const Section &) = delete;

  private:
    CommWatchdog &w;
    uint64_t id;
  };
  void setStallLimit(std::chrono::milliseconds limit);

  /// The default OnStall: prints `message` and ends the process with status
  /// 1 at once; the stuck thread can be neither joined nor interrupted.
  [[noreturn]] static void endProcess(const std::string &message);

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

  // The monitor, apart from `mu`: a stuck poll runs with `mu` held.
  struct Open {
    std::chrono::steady_clock::time_point since;
    std::string subject;
    bool reported = false;
  };
  void monitorLoop();
  std::mutex monMu;
  std::condition_variable monCv;
  std::map<uint64_t, Open> sections;
  uint64_t nextSection = 0;
  std::chrono::milliseconds stallLimit;
  OnStall onStall;
  bool monStop = false;
  std::thread monitor; ///< started by the first Section
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
