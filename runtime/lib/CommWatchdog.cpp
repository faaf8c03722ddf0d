//===- CommWatchdog.cpp - timeouts for collectives in flight -------------===//

#include "CommWatchdog.h"

#include "rlhf/runtime/Error.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

using namespace rlhf;
using Clock = std::chrono::steady_clock;

CommWatchdog::CommWatchdog(std::chrono::microseconds tick,
                           std::chrono::milliseconds stallLimit,
                           OnStall onStall)
    : tick(tick), stallLimit(stallLimit), onStall(std::move(onStall)) {}

CommWatchdog::~CommWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  // The monitor stops last: the join waits for a poll or abort in progress,
  // and a stuck one must still end the process.
  if (thread.joinable())
    thread.join();
  {
    std::lock_guard<std::mutex> lock(monMu);
    monStop = true;
  }
  monCv.notify_all();
  if (monitor.joinable())
    monitor.join();
}

CommWatchdog &CommWatchdog::process() {
  // Built on first use, after CUDA has started (its teardown registers
  // first), so at exit this thread stops before CUDA goes away.
  static CommWatchdog watchdog;
  return watchdog;
}

void CommWatchdog::track(const void *lane, std::string what, Poll poll,
                         std::chrono::milliseconds timeout,
                         std::function<void()> abort) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!failed.empty() || stop)
      return; // everything was aborted; the caller's check() throws
    lanes[lane].push_back(Op{std::move(what), std::move(poll),
                             Clock::now() + timeout, timeout,
                             std::move(abort)});
    ++pending;
    if (!thread.joinable())
      thread = std::thread([this] { loop(); });
  }
  cv.notify_all();
}

std::function<void()> CommWatchdog::sweep(std::vector<Op> &ended) {
  const auto now = Clock::now();
  for (auto it = lanes.begin(); it != lanes.end();) {
    std::deque<Op> &ops = it->second;
    while (!ops.empty()) {
      Op &op = ops.front();
      std::string why;
      State s;
      {
        Section watched(*this, op.what + "the watchdog's poll of it");
        s = op.poll(why);
      }
      if (s == State::Pending && now > op.deadline) {
        s = State::Failed;
        why = "timed out after " + std::to_string(op.timeout.count()) +
              " ms; a peer rank is likely dead or stuck";
      }
      if (s == State::Pending)
        break;
      if (s == State::Failed) {
        failed = op.what + why;
        std::function<void()> abort = std::move(op.abort);
        for (auto &[lane, rest] : lanes) // the abort ends every one in flight
          for (Op &o : rest)
            ended.push_back(std::move(o));
        lanes.clear();
        pending = 0;
        return abort ? abort : [] {};
      }
      ended.push_back(std::move(op));
      ops.pop_front();
      --pending;
    }
    it = ops.empty() ? lanes.erase(it) : std::next(it);
  }
  return nullptr;
}

void CommWatchdog::loop() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stop) {
    cv.wait(lock, [&] { return stop || pending > 0; });
    if (stop)
      break;
    std::vector<Op> ended;
    std::function<void()> abort = sweep(ended);
    if (pending == 0)
      cv.notify_all(); // drain()
    lock.unlock();
    // Outside the lock, so that the calling thread can go on queueing: the
    // abort may wait for it, and dropping an op frees its event (and maybe
    // the last hold on its communicator).
    if (abort) {
      Section watched(*this, failure() + "; then aborting every communicator");
      abort();
    }
    ended.clear();
    std::this_thread::sleep_for(tick);
    lock.lock();
  }
}

void CommWatchdog::check() const {
  std::lock_guard<std::mutex> lock(mu);
  if (!failed.empty())
    throw Error(failed);
}

std::string CommWatchdog::failure() const {
  std::lock_guard<std::mutex> lock(mu);
  return failed;
}

int64_t CommWatchdog::inFlight() const {
  std::lock_guard<std::mutex> lock(mu);
  return pending;
}

void CommWatchdog::drain() {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return pending == 0 || !failed.empty() || stop; });
  if (!failed.empty())
    throw Error(failed);
}

CommWatchdog::Section::Section(CommWatchdog &w, std::string subject) : w(w) {
  std::lock_guard<std::mutex> lock(w.monMu);
  id = w.nextSection++;
  w.sections.emplace(id, Open{Clock::now(), std::move(subject)});
  if (!w.monitor.joinable() && !w.monStop)
    w.monitor = std::thread([&w] { w.monitorLoop(); });
}

CommWatchdog::Section::~Section() {
  std::lock_guard<std::mutex> lock(w.monMu);
  w.sections.erase(id);
}

void CommWatchdog::setStallLimit(std::chrono::milliseconds limit) {
  {
    std::lock_guard<std::mutex> lock(monMu);
    stallLimit = limit;
  }
  monCv.notify_all();
}

void CommWatchdog::monitorLoop() {
  using std::chrono::milliseconds;
  std::unique_lock<std::mutex> lock(monMu);
  while (!monStop) {
    // A stall is seen within an eighth of the limit, and at most a second.
    monCv.wait_for(
        lock, std::clamp(stallLimit / 8, milliseconds(1), milliseconds(1000)));
    const auto now = Clock::now();
    for (auto &[id, open] : sections) {
      if (monStop || open.reported || now - open.since < stallLimit)
        continue;
      open.reported = true;
      const int64_t ms = stallLimit.count();
      std::string message =
          open.subject + " has not returned for " +
          (ms % 1000 ? std::to_string(ms) + " ms"
                     : std::to_string(ms / 1000) + " s") +
          "; ending this process so that the job stops instead of hanging "
          "(RLHF_WATCHDOG_STALL_S sets this limit)";
      OnStall tell = onStall;
      lock.unlock();
      tell(message);
      lock.lock();
      break; // sections may have changed meanwhile
    }
  }
}

void CommWatchdog::endProcess(const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

std::string rlhf::asyncCommFailure() {
  return CommWatchdog::process().failure();
}

namespace {
std::atomic<bool> anyAborted{false};
} // namespace

bool rlhf::communicatorAborted() { return anyAborted; }

void rlhf::noteCommunicatorAborted() { anyAborted = true; }
