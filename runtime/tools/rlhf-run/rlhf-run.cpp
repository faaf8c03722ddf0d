//===- rlhf-run.cpp - local launcher for rlhf workers ---------------------===//
//
// Spawns N workers of one program with the torchrun-style rendezvous
// variables, prefixes their output with the rank, forwards SIGINT/SIGTERM,
// and stops everyone as soon as one worker fails, so a job never hangs on a
// dead rank. Torch-free on purpose: it starts instantly.
//
//===----------------------------------------------------------------------===//

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace llvm;
using Clock = std::chrono::steady_clock;

static cl::OptionCategory runCat("rlhf-run options");
static cl::opt<unsigned>
    numWorkers("n", cl::desc("Number of worker processes (one per device)"),
               cl::value_desc("N"), cl::init(1), cl::cat(runCat));
static cl::alias numWorkersLong("nproc", cl::aliasopt(numWorkers),
                                cl::desc("Alias for -n"), cl::cat(runCat));
static cl::opt<std::string>
    masterAddr("master-addr",
               cl::desc("Address rank 0 listens on (default 127.0.0.1)"),
               cl::init("127.0.0.1"), cl::cat(runCat));
static cl::opt<unsigned> masterPort(
    "master-port",
    cl::desc("Rendezvous port (default 0: rank 0 takes a free one and "
             "tells the others through a file in /tmp)"),
    cl::init(0), cl::cat(runCat));
static cl::opt<unsigned> graceSeconds(
    "grace",
    cl::desc("Seconds the other workers get to exit after one fails "
             "or a signal arrives, before SIGKILL (default 10)"),
    cl::init(10), cl::cat(runCat));
static cl::opt<bool>
    noPrefix("no-prefix", cl::desc("Do not prefix output lines with the rank"),
             cl::cat(runCat));
static cl::opt<std::string> program(cl::Positional, cl::desc("<program>"),
                                    cl::Required, cl::cat(runCat));
static cl::list<std::string> programArgs(cl::ConsumeAfter,
                                         cl::desc("<program arguments>..."),
                                         cl::cat(runCat));

namespace {

int signalPipe[2] = {-1, -1};

void onSignal(int sig) {
  unsigned char s = static_cast<unsigned char>(sig);
  ssize_t ignored = write(signalPipe[1], &s, 1);
  (void)ignored;
}

struct Stream {
  int fd = -1;
  std::string pending; // bytes after the last newline
  bool toStderr = false;
};

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Stream out, err;
};

/// Where rank 0 publishes the port the kernel gave its store (MASTER_PORT=0);
/// removed when rlhf-run exits. Choosing a free port here and releasing it
/// would race with every other job starting on the host.
struct PortFile {
  std::string dir, path;
  PortFile() {
    std::string tmpl = "/tmp/rlhf-run-XXXXXX";
    if (mkdtemp(tmpl.data())) {
      dir = tmpl;
      path = dir + "/port";
    }
  }
  ~PortFile() {
    if (dir.empty())
      return;
    unlink(path.c_str());
    rmdir(dir.c_str());
  }
};

void emit(const Worker &w, Stream &s, StringRef line) {
  raw_ostream &os = s.toStderr ? errs() : outs();
  if (!noPrefix)
    os << "[rank " << w.rank << "] ";
  os << line << "\n";
  os.flush();
}

// Reads what is available; returns false at EOF.
bool pump(Worker &w, Stream &s) {
  char buf[4096];
  ssize_t n = read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return true;
  if (n <= 0) {
    if (!s.pending.empty())
      emit(w, s, s.pending);
    s.pending.clear();
    close(s.fd);
    s.fd = -1;
    return false;
  }
  s.pending.append(buf, n);
  size_t start = 0, nl;
  while ((nl = s.pending.find('\n', start)) != std::string::npos) {
    emit(w, s, StringRef(s.pending).slice(start, nl));
    start = nl + 1;
  }
  s.pending.erase(0, start);
  return true;
}

std::string describe(int status) {
  if (WIFEXITED(status))
    return formatv("exited with code {0}", WEXITSTATUS(status)).str();
  if (WIFSIGNALED(status))
    return formatv("was killed by signal {0} ({1})", WTERMSIG(status),
                   strsignal(WTERMSIG(status)))
        .str();
  return "stopped";
}

int exitCodeOf(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

bool spawn(Worker &w, unsigned port, const std::string &portFile) {
  int outp[2], errp[2];
  if (pipe(outp) || pipe(errp))
    return false;
  pid_t pid = fork();
  if (pid < 0)
    return false;
  if (pid == 0) {
    // Own process group: a terminal ^C reaches rlhf-run, which forwards it.
    setpgid(0, 0);
    dup2(outp[1], STDOUT_FILENO);
    dup2(errp[1], STDERR_FILENO);
    close(outp[0]);
    close(outp[1]);
    close(errp[0]);
    close(errp[1]);
    std::string n = std::to_string(numWorkers.getValue());
    std::string r = std::to_string(w.rank);
    setenv("MASTER_ADDR", masterAddr.c_str(), 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    if (!portFile.empty())
      setenv("RLHF_RENDEZVOUS_FILE", portFile.c_str(), 1);
    setenv("WORLD_SIZE", n.c_str(), 1);
    setenv("RANK", r.c_str(), 1);
    setenv("LOCAL_RANK", r.c_str(), 1);
    setenv("LOCAL_WORLD_SIZE", n.c_str(), 1);
    std::vector<char *> argv;
    argv.push_back(const_cast<char *>(program.c_str()));
    for (auto &a : programArgs)
      argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execvp(program.c_str(), argv.data());
    dprintf(STDERR_FILENO, "rlhf-run: cannot execute '%s': %s\n",
            program.c_str(), strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  close(outp[1]);
  close(errp[1]);
  w.pid = pid;
  w.running = true;
  w.out.fd = outp[0];
  w.err.fd = errp[0];
  w.err.toStderr = true;
  fcntl(w.out.fd, F_SETFL, O_NONBLOCK);
  fcntl(w.err.fd, F_SETFL, O_NONBLOCK);
  return true;
}

void signalAll(std::vector<Worker> &ws, int sig) {
  for (auto &w : ws)
    if (w.running)
      kill(-w.pid, sig);
}

} // namespace

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(runCat);
  cl::ParseCommandLineOptions(
      argc, argv,
      "rlhf-run: launch N local workers of an rlhfc-compiled program\n\n"
      "  rlhf-run -n 4 ./ppo --steps 20\n\n"
      "Each worker gets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, "
      "LOCAL_RANK\n"
      "and LOCAL_WORLD_SIZE, the same variables torchrun and Slurm wrappers "
      "set,\n"
      "so a compiled program runs unchanged on a cluster. Output lines are\n"
      "prefixed with '[rank R]'. When a worker fails, the others get SIGTERM,\n"
      "then SIGKILL after --grace seconds, and rlhf-run exits with the "
      "failing\n"
      "worker's code. Options after <program> go to the program.\n");
  if (numWorkers == 0) {
    errs() << "rlhf-run: error: -n must be at least 1\n";
    return 2;
  }
  if (pipe(signalPipe) != 0) {
    errs() << "rlhf-run: error: pipe: " << strerror(errno) << "\n";
    return 1;
  }
  fcntl(signalPipe[0], F_SETFD, FD_CLOEXEC);
  fcntl(signalPipe[1], F_SETFD, FD_CLOEXEC);
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::optional<PortFile> portFile;
  if (!masterPort) {
    portFile.emplace();
    if (portFile->dir.empty()) {
      errs() << "rlhf-run: error: cannot create a directory in /tmp for the "
                "rendezvous port: "
             << strerror(errno) << "; pass --master-port\n";
      return 1;
    }
  }
  std::vector<Worker> workers(numWorkers);
  for (unsigned r = 0; r < numWorkers; ++r) {
    workers[r].rank = r;
    if (!spawn(workers[r], masterPort, portFile ? portFile->path : "")) {
      errs() << "rlhf-run: error: cannot start rank " << r << ": "
             << strerror(errno) << "\n";
      signalAll(workers, SIGKILL);
      return 1;
    }
  }

  int failedRank = -1, failedStatus = 0, forwardedSignal = 0;
  std::vector<Worker *> failures; ///< failed before the stop, in reap order
  Clock::time_point settleAt;
  bool stopping = false;
  Clock::time_point killAt;
  auto beginStop = [&] {
    if (stopping)
      return;
    stopping = true;
    killAt = Clock::now() + std::chrono::seconds(graceSeconds);
    signalAll(workers, SIGTERM);
  };

  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker *, Stream *>> owners;
    fds.push_back({signalPipe[0], POLLIN, 0});
    owners.push_back({nullptr, nullptr});
    for (auto &w : workers)
      for (Stream *s : {&w.out, &w.err})
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          owners.push_back({&w, s});
        }
    bool anyRunning = false;
    for (auto &w : workers)
      anyRunning |= w.running;
    if (!anyRunning && fds.size() == 1)
      break;

    int ready = poll(fds.data(), fds.size(), 100);
    if (ready > 0) {
      if (fds[0].revents & POLLIN) {
        unsigned char sig = 0;
        if (read(signalPipe[0], &sig, 1) == 1) {
          if (forwardedSignal)
            signalAll(workers, SIGKILL); // second ^C: no more waiting
          forwardedSignal = sig;
          signalAll(workers, sig);
          stopping = true;
          killAt = Clock::now() + std::chrono::seconds(graceSeconds);
        }
      }
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
          pump(*owners[i].first, *owners[i].second);
    }

    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto &w : workers) {
        if (w.pid != pid)
          continue;
        w.running = false;
        w.status = status;
        bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (failed && failedRank < 0 && !forwardedSignal && !stopping) {
          if (failures.empty())
            settleAt = Clock::now() + std::chrono::milliseconds(300);
          failures.push_back(&w);
        }
      }
    }
    // A dead rank makes its peers fail too, often first: a short wait, then
    // the rank killed by a signal is named before ranks that exited with an
    // error, as the cause.
    bool anyLeft = false;
    for (auto &w : workers)
      anyLeft |= w.running;
    if (!failures.empty() && failedRank < 0 &&
        (Clock::now() >= settleAt || !anyLeft)) {
      Worker *cause = failures.front();
      for (Worker *f : failures)
        if (WIFSIGNALED(f->status)) {
          cause = f;
          break;
        }
      failedRank = cause->rank;
      failedStatus = cause->status;
      unsigned others = 0;
      for (auto &o : workers)
        others += o.running;
      errs() << "rlhf-run: error: rank " << cause->rank << " "
             << describe(cause->status);
      if (others)
        errs() << "; stopping the other " << others << " worker"
               << (others == 1 ? "" : "s");
      errs() << "\n";
      beginStop();
    }
    if (stopping && Clock::now() >= killAt)
      signalAll(workers, SIGKILL);
    // Grandchildren may keep a pipe open after every worker exited.
    if (!anyRunning && stopping && Clock::now() >= killAt)
      for (auto &w : workers)
        for (Stream *s : {&w.out, &w.err})
          if (s->fd >= 0) {
            close(s->fd);
            s->fd = -1;
          }
  }

  if (failedRank >= 0)
    return exitCodeOf(failedStatus);
  if (forwardedSignal) {
    errs() << "rlhf-run: stopped by signal " << forwardedSignal << "\n";
    return 128 + forwardedSignal;
  }
  return 0;
}
