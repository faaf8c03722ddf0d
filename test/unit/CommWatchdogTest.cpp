//===- CommWatchdogTest.cpp - timeouts for collectives in flight ----------===//
//
// The watchdog the NCCL backend hands its queued collectives to, driven here
// by polls over flags in place of CUDA events, so that every path (an end,
// a timeout, an asynchronous error, a host sync stuck behind a dead peer)
// runs on the CPU.
//
//===----------------------------------------------------------------------===//

#include "CommWatchdog.h"

#include "rlhf/runtime/Error.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

using namespace rlhf;
using namespace std::chrono_literals;
using State = CommWatchdog::State;

namespace {

/// An operation that ends when `done` is set.
CommWatchdog::Poll until(const std::atomic<bool> &done,
                         std::atomic<int> *polls = nullptr) {
  return [&done, polls](std::string &) {
    if (polls)
      ++*polls;
    return done ? State::Done : State::Pending;
  };
}

std::string failureOf(CommWatchdog &w) {
  try {
    w.drain();
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(CommWatchdog, OperationsThatEndLeaveNoFailure) {
  CommWatchdog w;
  std::atomic<bool> a{false}, b{false};
  std::atomic<int> aborts{0};
  int lane1 = 0, lane2 = 0;
  auto abort = [&] { ++aborts; };
  w.track(&lane1, "rank 0: all_reduce failed: ", until(a), 10s, abort);
  w.track(&lane1, "rank 0: broadcast failed: ", until(a), 10s, abort);
  w.track(&lane2, "rank 0: exchange failed: ", until(b), 10s, abort);
  EXPECT_EQ(w.inFlight(), 3);
  a = true;
  b = true;
  w.drain();
  EXPECT_EQ(w.inFlight(), 0);
  EXPECT_EQ(w.failure(), "");
  EXPECT_NO_THROW(w.check());
  EXPECT_EQ(aborts, 0);
}

TEST(CommWatchdog, AStuckOperationTimesOutAndAbortsOnce) {
  CommWatchdog w;
  std::atomic<bool> never{false};
  std::atomic<int> aborts{0};
  int lane = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i)
    w.track(&lane, "rank 3: all_reduce failed: ", until(never), 50ms,
            [&] { ++aborts; });
  std::string why = failureOf(w);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(why, "rank 3: all_reduce failed: timed out after 50 ms; a peer "
                 "rank is likely dead or stuck");
  EXPECT_GE(took, 50ms);
  EXPECT_LT(took, 5s);
  // drain() throws once the failure is recorded; the watchdog's thread
  // runs the abort just after, outside its lock (the abort may wait for
  // the calling thread), so a loaded host may get here first.
  for (auto until = std::chrono::steady_clock::now() + 5s;
       aborts == 0 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(aborts, 1); // one abort ends every operation in flight
  EXPECT_EQ(w.inFlight(), 0);
  EXPECT_THROW(w.check(), Error);
  // Later operations are not watched: the caller's check() throws first.
  w.track(&lane, "rank 3: broadcast failed: ", until(never), 50ms,
          [&] { ++aborts; });
  EXPECT_EQ(w.inFlight(), 0);
  EXPECT_EQ(w.failure(), why);
}

TEST(CommWatchdog, AnAsynchronousErrorFailsBeforeTheTimeout) {
  CommWatchdog w;
  std::atomic<bool> remoteError{false};
  int lane = 0;
  w.track(
      &lane, "rank 1: all_gather failed: ",
      [&](std::string &why) {
        if (!remoteError)
          return State::Pending;
        why = "remote process exited or there was a network error";
        return State::Failed;
      },
      1h, [] {});
  auto t0 = std::chrono::steady_clock::now();
  remoteError = true;
  EXPECT_EQ(failureOf(w), "rank 1: all_gather failed: remote process exited "
                          "or there was a network error");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(CommWatchdog, OnlyTheOldestOperationOfALaneIsPolled) {
  CommWatchdog w;
  std::atomic<bool> first{false}, second{false}, other{true};
  std::atomic<int> secondPolls{0}, otherPolls{0};
  int laneA = 0, laneB = 0;
  w.track(&laneA, "a: ", until(first), 10s, [] {});
  w.track(&laneA, "a: ", until(second, &secondPolls), 10s, [] {});
  w.track(&laneB, "b: ", until(other, &otherPolls), 10s, [] {});
  // Lane B is polled and ends while lane A's first operation holds A.
  while (w.inFlight() > 2)
    std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  EXPECT_GE(otherPolls, 1);
  EXPECT_EQ(secondPolls, 0);
  first = true;
  second = true;
  w.drain();
  EXPECT_GE(secondPolls, 1);
}

// The case the watchdog exists for: the calling thread is blocked in a host
// sync (here a future) behind a collective whose peer died. The abort, run
// on the watchdog's thread, releases it, and its next call throws.
TEST(CommWatchdog, AHostSyncStuckBehindADeadPeerIsReleased) {
  CommWatchdog w;
  std::promise<void> kernelsEnd;
  std::atomic<bool> aborted{false};
  int stream = 0;
  w.track(
      &stream, "rank 2: all_reduce failed: ",
      [&](std::string &) { return aborted ? State::Done : State::Pending; },
      30ms,
      [&] {
        aborted = true;
        kernelsEnd.set_value();
      });
  std::future<void> sync = kernelsEnd.get_future();
  ASSERT_EQ(sync.wait_for(10s), std::future_status::ready);
  try {
    w.check();
    FAIL() << "check() did not throw after the abort";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("rank 2: all_reduce failed: timed "
                                         "out after 30 ms"),
              std::string::npos)
        << e.what();
  }
}

TEST(CommWatchdog, DestroyingItWithOperationsInFlightReturns) {
  std::atomic<bool> never{false};
  std::atomic<int> aborts{0};
  auto t0 = std::chrono::steady_clock::now();
  {
    CommWatchdog w;
    int lane = 0;
    w.track(&lane, "rank 0: barrier failed: ", until(never), 1h,
            [&] { ++aborts; });
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(aborts, 0);
}

namespace {

/// An OnStall that records the message and then releases what was stuck.
struct StallRecorder {
  std::mutex mu;
  std::vector<std::string> messages;
  std::promise<void> told;
  std::atomic<bool> release{false};
  CommWatchdog::OnStall hook() {
    return [this](const std::string &m) {
      std::lock_guard<std::mutex> lock(mu);
      messages.push_back(m);
      if (messages.size() == 1)
        told.set_value();
      release = true;
    };
  }
};

/// Blocks until `release` is set, as a call stuck in a driver would.
void stuckUntil(const std::atomic<bool> &release) {
  while (!release)
    std::this_thread::sleep_for(1ms);
}

} // namespace

// The watchdog's own poll can block (a driver lock); the monitor reports it
// with the operation it was polling.
TEST(CommWatchdog, AStuckPollIsReportedAsAStall) {
  StallRecorder r;
  CommWatchdog w(2ms, 100ms, r.hook());
  int lane = 0;
  auto t0 = std::chrono::steady_clock::now();
  w.track(
      &lane, "rank 5: all_reduce failed: ",
      [&](std::string &) {
        stuckUntil(r.release);
        return State::Done;
      },
      1h, [] {});
  ASSERT_EQ(r.told.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms);
  w.drain();
  std::lock_guard<std::mutex> lock(r.mu);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0],
            "rank 5: all_reduce failed: the watchdog's poll of it has not "
            "returned for 100 ms; ending this process so that the job stops "
            "instead of hanging (RLHF_WATCHDOG_STALL_S sets this limit)");
}

// An abort that never returns (ncclCommAbort has hung in NCCL releases)
// would leave the calling thread stuck behind the dead peer for ever.
TEST(CommWatchdog, AStuckAbortIsReportedWithTheFailure) {
  StallRecorder r;
  CommWatchdog w(2ms, 100ms, r.hook());
  int lane = 0;
  w.track(
      &lane, "rank 1: broadcast failed: ",
      [](std::string &why) {
        why = "remote process exited";
        return State::Failed;
      },
      1h, [&] { stuckUntil(r.release); });
  ASSERT_EQ(r.told.get_future().wait_for(10s), std::future_status::ready);
  std::lock_guard<std::mutex> lock(r.mu);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].rfind("rank 1: broadcast failed: remote process "
                                "exited; then aborting every communicator "
                                "has not returned for 100 ms; ending this "
                                "process",
                                0),
            0u)
      << r.messages[0];
}

// Sections on other threads (an abort on the calling thread) are timed too,
// and calls that return within the limit, or a watchdog with nothing in
// flight, never count as stalls.
TEST(CommWatchdog, OnlyCallsOutlivingTheLimitAreStalls) {
  StallRecorder r;
  CommWatchdog w(2ms, 1s, r.hook());
  std::atomic<bool> done{false};
  int lane = 0;
  w.track(
      &lane, "rank 0: all_gather failed: ",
      [&](std::string &) {
        std::this_thread::sleep_for(50ms); // slow, but returns
        return done ? State::Done : State::Pending;
      },
      1h, [] {});
  {
    CommWatchdog::Section quick(w, "rank 0: x failed: y; then aborting");
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(1200ms); // polls keep returning
  done = true;
  w.drain();
  std::this_thread::sleep_for(1200ms); // idle
  {
    std::lock_guard<std::mutex> lock(r.mu);
    EXPECT_TRUE(r.messages.empty()) << r.messages.front();
  }
  std::thread caller([&] {
    CommWatchdog::Section stuck(
        w, "rank 0: send failed: timed out; then aborting its communicator");
    stuckUntil(r.release);
  });
  ASSERT_EQ(r.told.get_future().wait_for(10s), std::future_status::ready);
  caller.join();
  std::lock_guard<std::mutex> lock(r.mu);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].rfind("rank 0: send failed: timed out; then "
                                "aborting its communicator has not returned "
                                "for 1 s",
                                0),
            0u)
      << r.messages[0];
}

// The default reaction ends the process with status 1 and the message, so
// that the launcher names the rank and stops the job.
TEST(CommWatchdogDeathTest, AStallEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        CommWatchdog w(2ms, 50ms);
        CommWatchdog::Section stuck(
            w, "rank 7: all_gather failed: boom; then aborting");
        std::this_thread::sleep_for(30s);
      },
      testing::ExitedWithCode(1),
      "rank 7: all_gather failed: boom; then aborting has not returned for "
      "50 ms; ending this process so that the job stops instead of hanging");
}
