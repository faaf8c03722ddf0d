//===- ExternalRewardTest.cpp - the script_reward worker pool -------------===//
//
// Real worker processes: small Python and sh scripts written to a temporary
// folder, driven through pipes exactly as a program's controller drives
// them. Timings are compared as ratios, never against the wall clock.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/ExternalReward.h"
#include "rlhf/runtime/Error.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace rlhf;
namespace fs = std::filesystem;

namespace {

// Doubles "x"; "act" makes it misbehave on purpose.
const char *kWorker = R"(import json, os, sys, time
while True:
    line = sys.stdin.readline()
    if not line:
        break
    req = json.loads(line)
    act = req.get("act", "")
    if act == "exit":
        sys.exit(3)
    if act == "sleep":
        time.sleep(req["seconds"])
    if act == "garbage":
        print("not json", flush=True)
        continue
    if act == "noscore":
        print(json.dumps({"value": 1}), flush=True)
        continue
    if act == "twolines":
        print('{"score": 1}\n{"score": 2}', flush=True)
        continue
    if act == "nonewline":
        print('{"score": 1}', end="", flush=True)
        time.sleep(30)
        continue
    if act == "pid":
        print(json.dumps({"score": os.getpid()}), flush=True)
        continue
    if act == "late":
        # Its reply, then a second line once the next request is out.
        print(json.dumps({"row": req["row"], "score": 1}), flush=True)
        time.sleep(0.5)
        print(json.dumps({"row": req["row"], "score": 5}), flush=True)
        continue
    reply = {"score": req["x"] * 2}
    if "row" in req:
        reply["row"] = req["row"]
    print(json.dumps(reply), flush=True)
)";

// Ignores SIGTERM and the end of its input; records its pid.
const char *kStubborn = R"(import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open("stubborn-%d.pid" % os.getpid(), "w") as f:
    f.write(str(os.getpid()))
while True:
    line = sys.stdin.readline()
    if not line:
        while True:
            time.sleep(60)
    print('{"score": 1}', flush=True)
)";

class ExternalReward : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "rlhf-external-reward-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir = tmpl;
    std::ofstream(dir / "worker.py") << kWorker;
    std::ofstream(dir / "stubborn.py") << kStubborn;
    std::ofstream(dir / "sleepy.sh")
        << "while read -r line; do sleep 0.2; echo '{\"score\": 1}'; done\n";
  }
  void TearDown() override { fs::remove_all(dir); }

  ExternalRewardOptions options(const std::string &command,
                                int64_t workers = 2) {
    ExternalRewardOptions o;
    o.command = command;
    o.directory = dir.string();
    o.workers = workers;
    o.timeout = 10;
    o.grace = 0.3;
    o.warn = [this](const std::string &w) { warnings.push_back(w); };
    return o;
  }

  fs::path dir;
  std::vector<std::string> warnings;
};

std::vector<std::string> requests(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i)
    out.push_back("{\"x\": " + std::to_string(i) + "}");
  return out;
}

/// The message score() throws, or "" when it does not.
std::string scoreError(ExternalRewardPool &pool,
                       const std::vector<std::string> &reqs) {
  try {
    pool.score(reqs);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

double secondsOf(const std::function<void()> &f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

/// Gone: no such process, or a zombie some other parent has yet to reap.
bool gone(int pid) {
  if (kill(pid, 0) != 0)
    return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() &&
         text[close + 2] == 'Z';
}

bool goneWithin(int pid, double seconds) {
  auto until = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(int(seconds * 1000));
  while (!gone(pid)) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST_F(ExternalReward, ScoresEveryRequestWithLongLivedWorkers) {
  ExternalRewardPool pool(options("python3 worker.py", 3));
  std::vector<double> s = pool.score(requests(10));
  ASSERT_EQ(s.size(), 10u);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(s[size_t(i)], 2.0 * i);
  std::vector<int> pids = pool.pids();
  EXPECT_EQ(pids.size(), 3u);
  // The same processes serve the next batch.
  s = pool.score(requests(4));
  EXPECT_EQ(s[3], 6.0);
  EXPECT_EQ(pool.pids(), pids);
  EXPECT_TRUE(pool.score({}).empty());
  EXPECT_TRUE(warnings.empty());
}

TEST_F(ExternalReward, SpreadsRequestsOverEveryWorker) {
  ExternalRewardPool pool(options("exec python3 worker.py", 3));
  std::vector<std::string> reqs(6, "{\"act\": \"pid\"}");
  std::vector<double> s = pool.score(reqs);
  std::set<double> served(s.begin(), s.end());
  EXPECT_EQ(served.size(), 3u);
}

TEST_F(ExternalReward, KeepsWorkersRequestsInFlight) {
  // Each request takes 0.2 s: four workers take about a quarter of the time
  // one does.
  std::vector<std::string> reqs = requests(8);
  double one = secondsOf([&] {
    ExternalRewardPool pool(options("sh sleepy.sh", 1));
    pool.score(reqs);
  });
  double four = secondsOf([&] {
    ExternalRewardPool pool(options("sh sleepy.sh", 4));
    pool.score(reqs);
  });
  EXPECT_GT(one, 1.5);
  EXPECT_LT(four / one, 0.5)
      << "1 worker: " << one << " s, 4: " << four << " s";
}

TEST_F(ExternalReward, HeartbeatsWhileWaiting) {
  // 4 requests of 0.2 s on one worker, a heartbeat every 0.1 s.
  ExternalRewardOptions o = options("sh sleepy.sh", 1);
  int beats = 0;
  o.heartbeat = [&] { ++beats; };
  o.heartbeatInterval = 0.1;
  ExternalRewardPool pool(o);
  pool.score(requests(4));
  EXPECT_GE(beats, 4);
  EXPECT_LE(beats, 9);
}

TEST_F(ExternalReward, CrashIsAnErrorNamingCommandRowAndReason) {
  ExternalRewardPool pool(options("python3 worker.py"));
  std::vector<std::string> reqs = requests(4);
  reqs[2] = "{\"act\": \"exit\"}";
  std::string err = scoreError(pool, reqs);
  EXPECT_NE(err.find("'python3 worker.py'"), std::string::npos) << err;
  EXPECT_NE(err.find("exited with status 3 before replying on row 2"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("declare 'default = ...'"), std::string::npos) << err;
  // Every worker was stopped; the next call starts fresh ones.
  EXPECT_TRUE(pool.pids().empty());
  EXPECT_EQ(pool.score(requests(3))[2], 4.0);
}

TEST_F(ExternalReward, CrashWithDefaultScoresItAndRestarts) {
  ExternalRewardOptions o = options("python3 worker.py");
  o.fallback = -1.0;
  ExternalRewardPool pool(o);
  std::vector<std::string> reqs = requests(6);
  reqs[2] = "{\"act\": \"exit\"}";
  std::vector<double> s = pool.score(reqs);
  EXPECT_EQ(s[2], -1.0);
  EXPECT_EQ(s[5], 10.0);
  EXPECT_EQ(pool.restarts(), 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("row 2"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("scored it -1 and restarted"), std::string::npos)
      << warnings[0];
  EXPECT_EQ(pool.pids().size(), 2u);
  EXPECT_EQ(pool.score(requests(2))[1], 2.0);
}

// Timeouts of 2 s: a first request's also covers starting python3, which
// takes a while on a loaded machine.
TEST_F(ExternalReward, TimeoutIsAnError) {
  ExternalRewardOptions o = options("python3 worker.py");
  o.timeout = 2;
  ExternalRewardPool pool(o);
  std::vector<std::string> reqs = requests(3);
  reqs[1] = "{\"act\": \"sleep\", \"seconds\": 30}";
  std::string err;
  double took = secondsOf([&] { err = scoreError(pool, reqs); });
  EXPECT_NE(err.find("gave no reply within 2 s on row 1"), std::string::npos)
      << err;
  EXPECT_LT(took, 10.0);
}

// A reply without its newline is named as such, not as silence.
TEST_F(ExternalReward, ReplyWithoutNewlineIsNamed) {
  ExternalRewardOptions o = options("python3 worker.py");
  o.timeout = 2;
  ExternalRewardPool pool(o);
  std::vector<std::string> reqs = requests(1);
  reqs[0] = "{\"act\": \"nonewline\"}";
  std::string err = scoreError(pool, reqs);
  EXPECT_NE(err.find("gave no reply within 2 s (it wrote '{\"score\": 1}' "
                     "but no newline after it; end each reply with one and "
                     "flush)"),
            std::string::npos)
      << err;
}

TEST_F(ExternalReward, TimeoutWithDefault) {
  ExternalRewardOptions o = options("python3 worker.py");
  o.timeout = 2;
  o.fallback = 0.0;
  ExternalRewardPool pool(o);
  std::vector<std::string> reqs = requests(5);
  reqs[1] = "{\"act\": \"sleep\", \"seconds\": 30}";
  std::vector<double> s = pool.score(reqs);
  EXPECT_EQ(s[1], 0.0);
  EXPECT_EQ(s[4], 8.0);
  EXPECT_EQ(pool.restarts(), 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("no reply within 2 s on row 1"), std::string::npos)
      << warnings[0];
}

TEST_F(ExternalReward, MalformedRepliesAreErrors) {
  ExternalRewardPool pool(options("python3 worker.py"));
  for (auto [act, why] :
       {std::pair("garbage", "replied 'not json', which is not a JSON object"),
        std::pair("noscore", "which has no number \"score\""),
        std::pair("twolines", "wrote more than one line for one request")}) {
    std::vector<std::string> reqs = requests(2);
    reqs[0] = std::string("{\"act\": \"") + act + "\"}";
    std::string err = scoreError(pool, reqs);
    EXPECT_NE(err.find(why), std::string::npos) << err;
    EXPECT_NE(err.find("on row 0"), std::string::npos) << err;
  }
}

TEST_F(ExternalReward, AnEchoedRowTellsAStrayLineFromTheNextReply) {
  ExternalRewardOptions o = options("python3 worker.py", 1);
  ExternalRewardPool pool(o);
  // Replies that echo their row are scores like any other.
  std::vector<double> s =
      pool.score({"{\"x\": 1, \"row\": 0}", "{\"x\": 2, \"row\": 1}"});
  EXPECT_EQ(s, (std::vector<double>{2, 4}));
  // Row 0's late second line reaches the worker's pipe after row 1's
  // request: without the echo it would be row 1's score.
  std::string err = scoreError(
      pool, {"{\"act\": \"late\", \"row\": 0}", "{\"x\": 7, \"row\": 1}"});
  EXPECT_NE(err.find("replied '{\"row\": 0, \"score\": 5}' to the request "
                     "of row 1 (a line left over from another request?"),
            std::string::npos)
      << err;
}

TEST_F(ExternalReward, WorkerEndingBetweenRequests) {
  // Answers one request, then exits: found at the next request, which it
  // was never sent, so with a default the request goes to a fresh worker.
  ExternalRewardOptions o = options("read -r line; echo '{\"score\": 1}'", 1);
  {
    ExternalRewardPool pool(o);
    EXPECT_EQ(pool.score(requests(1))[0], 1.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::string err = scoreError(pool, requests(2));
    EXPECT_NE(err.find("worker 0, exited with status 0 between requests; "
                       "fix the command"),
              std::string::npos)
        << err;
  }
  o.fallback = -1.0;
  ExternalRewardPool pool(o);
  EXPECT_EQ(pool.score(requests(1))[0], 1.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(pool.score(requests(1))[0], 1.0);
  EXPECT_EQ(pool.restarts(), 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("exited with status 0 between requests; "
                             "restarted the worker"),
            std::string::npos)
      << warnings[0];
}

TEST_F(ExternalReward, MissingCommandSaysSo) {
  ExternalRewardPool pool(options("no-such-verifier --strict"));
  std::string err = scoreError(pool, requests(1));
  EXPECT_NE(err.find("exited with status 127 (the shell found no such "
                     "command) before replying on row 0"),
            std::string::npos)
      << err;
}

TEST_F(ExternalReward, MissingFolderSaysSo) {
  ExternalRewardOptions o = options("python3 worker.py");
  o.directory = (dir / "absent").string();
  ExternalRewardPool pool(o);
  std::string err = scoreError(pool, requests(1));
  EXPECT_NE(err.find("does not exist on this machine"), std::string::npos)
      << err;
}

TEST_F(ExternalReward, WorkerIgnoringSigtermIsKilledAndReaped) {
  // python3 ignores both the end of its input and SIGTERM. With `exec` it
  // is the group's leader and waits out both grace periods; otherwise the
  // shell leads, dies of SIGTERM, and SIGKILL to the group takes python3.
  for (auto [command, graces] : {std::pair("exec python3 stubborn.py", 2),
                                 std::pair("python3 stubborn.py; true", 1)}) {
    SCOPED_TRACE(command);
    for (auto &e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind("stubborn-", 0) == 0)
        fs::remove(e.path());
    std::vector<int> leaders, workers;
    double took = 0;
    {
      ExternalRewardPool pool(options(command, 2));
      EXPECT_EQ(pool.score(requests(4)), std::vector<double>(4, 1.0));
      leaders = pool.pids();
      for (auto &e : fs::directory_iterator(dir))
        if (e.path().filename().string().rfind("stubborn-", 0) == 0)
          workers.push_back(std::stoi(e.path().stem().string().substr(9)));
      ASSERT_EQ(workers.size(), 2u);
      took = secondsOf([&] { pool.shutdown(); });
      EXPECT_TRUE(pool.pids().empty());
    }
    // Grace periods of 0.3 s: closing stdin, then SIGTERM, then SIGKILL.
    EXPECT_GE(took, 0.3 * graces - 0.05);
    EXPECT_LT(took, 5.0);
    for (int pid : leaders) {
      // Reaped by the pool: not even a zombie of ours is left.
      EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);
      EXPECT_EQ(errno, ECHILD);
      EXPECT_TRUE(gone(pid)) << pid;
    }
    for (int pid : workers)
      EXPECT_TRUE(goneWithin(pid, 2.0)) << "python3 worker " << pid;
  }
}

TEST_F(ExternalReward, DestructorStopsWorkers) {
  std::vector<int> pids;
  {
    ExternalRewardPool pool(options("exec python3 worker.py", 2));
    pool.score(requests(2));
    pids = pool.pids();
  }
  ASSERT_EQ(pids.size(), 2u);
  for (int pid : pids)
    EXPECT_TRUE(gone(pid)) << pid;
}

} // namespace
