//===- CommWatchdog.cpp - timeouts for collectives in flight -------------===//

#include "CommWatchdog.h"

#include "rlhf/runtime/Error.h"

#include <atomic>

using namespace rlhf;
using Clock = std::chrono::steady_clock;

CommWatchdog::CommWatchdog(std::chrono::microseconds tick) : tick(tick) {}

CommWatchdog::~CommWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  if (thread.joinable())
    thread.join();
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
      State s = op.poll(why);
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
    if (abort)
      abort();
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

std::string rlhf::asyncCommFailure() {
  return CommWatchdog::process().failure();
}

namespace {
std::atomic<bool> anyAborted{false};
} // namespace

bool rlhf::communicatorAborted() { return anyAborted; }

void rlhf::noteCommunicatorAborted() { anyAborted = true; }
