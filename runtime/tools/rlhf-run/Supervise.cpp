//===- Supervise.cpp - watching a launcher's workers to the job's end -----===//
//
// rlhf-run's main loop: it relays the workers' output, forwards signals,
// and when a worker fails (here, or on another node through the NodeLink)
// names the cause, stops the rest (SIGTERM, then SIGKILL after the grace)
// and returns the failing worker's exit code.
//
//===----------------------------------------------------------------------===//

#include "Supervise.h"

#include "rlhf/runtime/rlhf_program.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace llvm;
using namespace rlhfrun;
using Clock = std::chrono::steady_clock;

namespace {

/// Names a stopped rank (on any node) as the likely cause of a failure.
void noteStopped(int rank, unsigned node, bool multi) {
  errs() << "rlhf-run: note: rank " << rank;
  if (multi)
    errs() << " (node " << node << ")";
  errs() << " is stopped (SIGSTOP or a debugger), so its peers timed out "
            "waiting for it; it is the likely cause\n";
}

/// Whether process `pid` is stopped (state T or t in /proc/PID/stat).
bool isStopped(pid_t pid) {
  std::FILE *f =
      std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f)
    return false;
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // "pid (comm) S ...": the state follows the last ')'.
  const char *close = std::strrchr(buf, ')');
  return close && close[1] == ' ' && (close[2] == 'T' || close[2] == 't');
}

} // namespace

int rlhfrun::supervise(std::vector<Worker> &workers, NodeLink *link,
                       const SuperviseConfig &c) {
  const bool multi = c.multi;
  /// A worker that failed, here or on another node.
  struct Failure {
    unsigned node;
    int rank;
    int status;
  };
  std::vector<Failure> failures; ///< failed before the stop, in report order
  RepeatedErrors repeated;
  bool decided = false;          ///< the error that ends the job is printed
  /// Stopped ranks other nodes named before this one printed its error:
  /// noted after it, as the local ones are.
  std::vector<std::pair<int, unsigned>> remoteStopped;
  int exitCode = 0, forwardedSignal = 0;
  /// SIGUSR1 reached the workers: they save a checkpoint after the step in
  /// progress and exit with RLHF_EXIT_STOPPED, which is then no failure.
  bool checkpointRequested = false;
  auto requestCheckpoint = [&] {
    if (!checkpointRequested)
      errs() << "rlhf-run: SIGUSR1: the workers save a checkpoint after the "
                "step in progress and stop\n";
    checkpointRequested = true;
    signalAll(workers, SIGUSR1);
  };
  unsigned localSignals = 0;
  bool stopping = false, reportedDone = false, jobDone = false;
  Clock::time_point settleAt, killAt;
  auto running = [&] {
    unsigned n = 0;
    for (auto &w : workers)
      n += w.running;
    return n;
  };
  auto beginStop = [&] {
    if (stopping)
      return;
    stopping = true;
    killAt = Clock::now() + std::chrono::seconds(c.graceSeconds);
    signalAll(workers, SIGTERM);
  };
  auto forward = [&](int sig) {
    forwardedSignal = sig;
    signalAll(workers, sig);
    stopping = true;
    killAt = Clock::now() + std::chrono::seconds(c.graceSeconds);
  };
  // What the error line says about the workers it stops.
  auto stoppingWhat = [&](bool localCause) -> std::string {
    unsigned n = running();
    if (!n)
      return "";
    return formatv("; stopping the {0}{1}{2} worker{3}",
                   localCause ? "other " : "", n, multi ? " local" : "",
                   n == 1 ? "" : "s")
        .str();
  };
  auto onFailure = [&](unsigned node, int rank, int status) {
    if (decided || stopping || forwardedSignal)
      return;
    if (failures.empty())
      settleAt = Clock::now() + std::chrono::milliseconds(multi ? 1000 : 300);
    failures.push_back({node, rank, status});
  };

  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker *, Stream *>> owners;
    fds.push_back({c.signalFd, POLLIN, 0});
    owners.push_back({nullptr, nullptr});
    for (auto &w : workers)
      for (Stream *s : {&w.out, &w.err})
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          owners.push_back({&w, s});
        }
    bool anyRunning = running() > 0;
    if (!anyRunning && fds.size() == 1) {
      if (!multi || decided || forwardedSignal || jobDone)
        break;
      // Every local worker exited 0: wait for the other nodes' verdict.
      if (failures.empty() && !reportedDone) {
        reportedDone = true;
        link->reportDone();
      }
    }
    size_t linkFds = fds.size();
    if (link)
      link->addPollFds(fds);

    int ready = poll(fds.data(), fds.size(), 100);
    if (ready > 0) {
      if (fds[0].revents & POLLIN) {
        unsigned char sig = 0;
        if (read(c.signalFd, &sig, 1) == 1 && sig == SIGUSR1) {
          requestCheckpoint();
          if (link)
            link->reportSignal(sig);
        } else if (sig) {
          if (++localSignals > 1)
            signalAll(workers, SIGKILL); // second ^C: no more waiting
          if (link && !forwardedSignal)
            link->reportSignal(sig);
          forward(sig);
        }
      }
      for (size_t i = 1; i < linkFds; ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
          pump(*owners[i].first, *owners[i].second, c.prefix, repeated);
    }

    if (link) {
      std::vector<NodeEvent> events;
      link->step(ArrayRef(fds).drop_front(linkFds), events);
      for (NodeEvent &e : events) {
        switch (e.kind) {
        case NodeEvent::WorkerFailed:
          onFailure(e.node, e.rank, e.status);
          break;
        case NodeEvent::Signal:
          if (e.status == SIGUSR1) {
            requestCheckpoint();
            break;
          }
          if (forwardedSignal)
            break;
          errs() << formatv("rlhf-run: node {0} got signal {1}{2}\n", e.node,
                            e.status,
                            running() ? "; stopping the local workers" : "");
          forward(e.status);
          break;
        case NodeEvent::Error:
          // A node that said goodbye stopped for a reason we already know
          // (node 0 says it after the end of a job, too).
          if (decided || forwardedSignal || jobDone ||
              (e.orderly && (stopping || !failures.empty())))
            break;
          decided = true;
          exitCode = 1;
          errs() << "rlhf-run: error: " << e.message << stoppingWhat(false)
                 << "\n";
          beginStop();
          break;
        case NodeEvent::JobDone:
          jobDone = true;
          break;
        case NodeEvent::Stopped:
          if (decided)
            noteStopped(e.rank, e.node, multi);
          else
            remoteStopped.push_back({e.rank, e.node});
          break;
        }
      }
    }

    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto &w : workers) {
        if (w.pid != pid)
          continue;
        w.running = false;
        w.status = status;
        bool failed = !(WIFEXITED(status) &&
                        (WEXITSTATUS(status) == 0 ||
                         (checkpointRequested &&
                          WEXITSTATUS(status) == RLHF_EXIT_STOPPED)));
        if (failed && !decided && !stopping && !forwardedSignal) {
          onFailure(c.nodeRank, w.rank, status);
          if (link)
            link->reportFailure(w.rank, status);
        }
      }
    }
    // A dead rank makes its peers fail too, often first: a short wait, then
    // the rank killed by a signal is named before ranks that exited with an
    // error, as the cause. Other nodes' reports get a longer wait: their
    // launchers notice a dead worker at their next 100 ms tick, maybe late on
    // a loaded host.
    if (!failures.empty() && !decided &&
        (Clock::now() >= settleAt || (!multi && !running()))) {
      Failure cause = failures.front();
      for (Failure &f : failures)
        if (WIFSIGNALED(f.status)) {
          cause = f;
          break;
        }
      decided = true;
      exitCode = exitCodeOf(cause.status);
      bool local = cause.node == c.nodeRank;
      errs() << "rlhf-run: error: rank " << cause.rank;
      if (multi)
        errs() << " (node " << cause.node << ")";
      errs() << " " << describe(cause.status) << stoppingWhat(local);
      // Repeat its error: peers' failures it caused may have come after.
      for (auto &w : workers)
        if (local && w.rank == cause.rank && !w.firstError.empty()) {
          StringRef e = StringRef(w.firstError).trim();
          std::string me = "rank " + std::to_string(w.rank) + ": ";
          e.consume_front(me);
          e.consume_front("error: ");
          errs() << ": " << e;
        }
      errs() << "\n";
      // A stopped rank (SIGSTOP, a debugger, a frozen cgroup) fails nobody
      // itself: its peers time out waiting for it, and one of them is named
      // above. Name the stopped one as the likely cause.
      for (auto &w : workers)
        if (w.running && isStopped(w.pid)) {
          noteStopped(w.rank, c.nodeRank, multi);
          if (link)
            link->reportStopped(w.rank);
        }
      for (auto [rank, node] : remoteStopped)
        noteStopped(rank, node, multi);
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

  if (link) {
    std::vector<NodeEvent> late;
    link->close(std::chrono::seconds(2), decided ? &late : nullptr);
    for (NodeEvent &e : late)
      noteStopped(e.rank, e.node, multi);
  }
  noteRepeatedErrors(repeated);
  if (decided)
    return exitCode;
  if (forwardedSignal) {
    errs() << "rlhf-run: stopped by signal " << forwardedSignal << "\n";
    return 128 + forwardedSignal;
  }
  // Asked to stop early, the workers did (a request during the last step
  // lets the run finish).
  for (auto &w : workers)
    if (checkpointRequested && WIFEXITED(w.status) &&
        WEXITSTATUS(w.status) == RLHF_EXIT_STOPPED) {
      errs() << "rlhf-run: stopped on request after a checkpoint; continue "
                "with --resume\n";
      return RLHF_EXIT_STOPPED;
    }
  return 0;
}
