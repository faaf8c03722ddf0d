//===- CommTest.cpp - Gloo collectives across real processes --------------===//

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <netinet/in.h>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

unsigned freePort() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  bind(s, reinterpret_cast<sockaddr *>(&a), sizeof(a));
  getsockname(s, reinterpret_cast<sockaddr *>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

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

// Starts WORLD ranks of the comm worker with stdout+stderr in a log file.
std::vector<Proc> launch(int world, const std::vector<std::string> &extraEnv) {
  unsigned port = freePort();
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
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("RLHF_COMM_TIMEOUT_MS", "10000", 1);
      for (const auto &kv : extraEnv)
        putenv(const_cast<char *>(kv.c_str()));
      execl(RLHF_COMM_WORKER, RLHF_COMM_WORKER, nullptr);
      _exit(127);
    }
    ps[r].pid = pid;
  }
  return ps;
}

// Reaps until every process ended or the deadline passed; returns false on
// a hang (and kills the leftovers so the test itself never hangs).
bool waitAll(std::vector<Proc> &ps, std::chrono::seconds limit) {
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

bool exitedOk(const Proc &p) {
  return WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0;
}

TEST(GlooComm, AllReduceAcrossTwoProcesses) {
  auto ps = launch(2, {});
  ASSERT_TRUE(waitAll(ps, std::chrono::seconds(60))) << "workers hung";
  for (int r = 0; r < 2; ++r) {
    std::string out = ps[r].output();
    EXPECT_TRUE(exitedOk(ps[r])) << "rank " << r << ":\n" << out;
    EXPECT_NE(out.find("all-reduce 1 ok (sum 3)"), std::string::npos) << out;
  }
}

TEST(GlooComm, KilledPeerEndsWithAnErrorNotAHang) {
  auto ps = launch(2, {"RLHF_TEST_STALL_RANK=1"});
  // Wait until rank 1 finished the first all-reduce and stalls, then kill it
  // while rank 0 waits in the second.
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (ps[1].output().find("stalled") == std::string::npos) {
    ASSERT_LT(Clock::now(), deadline) << "rank 1 never reached the stall";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(ps[1].pid, SIGKILL);
  // Rank 0 must give up well within the 10 s collective timeout plus slack.
  ASSERT_TRUE(waitAll(ps, std::chrono::seconds(40)))
      << "rank 0 hung after its peer died:\n"
      << ps[0].output();
  EXPECT_TRUE(WIFSIGNALED(ps[1].status));
  EXPECT_FALSE(exitedOk(ps[0]));
  std::string out = ps[0].output();
  EXPECT_NE(out.find("error: rank 0/2: all_reduce failed"), std::string::npos)
      << out;
}

} // namespace
