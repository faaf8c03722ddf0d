//===- ProcessHarness.h - spawn worker processes for tests ------*- C++ -*-===//
//
// Starts real worker processes with the rendezvous variables set, and waits
// for them with a deadline: a broken collective fails the test (and the
// leftovers are killed) instead of hanging it.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_TEST_UNIT_PROCESSHARNESS_H
#define RLHF_TEST_UNIT_PROCESSHARNESS_H

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace rlhf::testing {


using Clock = std::chrono::steady_clock;

struct Proc {
  pid_t pid = -1;
  std::string log;
  bool done = false;
  int status = 0;

  std::string output() const {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

// Starts WORLD ranks of `program` with stdout+stderr in a log file each.
inline std::vector<Proc> launch(const char *program, int world,
                                const std::vector<std::string> &extraEnv) {
  char dir[] = "/tmp/rlhf-commtest-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  std::vector<Proc> ps(world);
  for (int r = 0; r < world; ++r) {
    ps[r].log = std::string(dir) + "/rank" + std::to_string(r) + ".log";
    pid_t pid = fork();
    if (pid == 0) {
      int fd = open(ps[r].log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      // Rank 0 takes a free port and publishes it (as under rlhf-run).
      setenv("MASTER_PORT", "0", 1);
      setenv("RLHF_RENDEZVOUS_FILE", (std::string(dir) + "/port").c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("RLHF_COMM_TIMEOUT_MS", "10000", 1);
      for (const auto &kv : extraEnv)
        putenv(const_cast<char *>(kv.c_str()));
      execl(program, program, nullptr);
      _exit(127);
    }
    ps[r].pid = pid;
  }
  return ps;
}

// Reaps until every process ended or the deadline passed; returns false on
// a hang (and kills the leftovers so the test itself never hangs).
inline bool waitAll(std::vector<Proc> &ps, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  for (;;) {
    bool all = true;
    for (auto &p : ps) {
      if (p.done)
        continue;
      if (waitpid(p.pid, &p.status, WNOHANG) == p.pid)
        p.done = true;
      else
        all = false;
    }
    if (all)
      return true;
    if (Clock::now() > deadline) {
      for (auto &p : ps)
        if (!p.done) {
          kill(p.pid, SIGKILL);
          waitpid(p.pid, &p.status, 0);
          p.done = true;
        }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

inline bool exitedOk(const Proc &p) {
  return WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0;
}

} // namespace rlhf::testing

#endif // RLHF_TEST_UNIT_PROCESSHARNESS_H
