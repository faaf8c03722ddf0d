//===- ExternalReward.cpp - rewards from a pool of worker processes -------===//
//
// One thread drives every worker: requests go out through non-blocking
// pipes, replies come back through poll(), and each request in flight has a
// deadline. Nothing here waits without a bound except reaping a worker that
// was sent SIGKILL.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/ExternalReward.h"
#include "rlhf/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace rlhf;
using Clock = std::chrono::steady_clock;

struct ExternalRewardPool::Worker {
  int index = 0;
  pid_t pid = -1;
  int in = -1;          ///< the worker's stdin (our write end)
  int out = -1;         ///< the worker's stdout (our read end)
  std::string pending;  ///< request bytes not yet written
  std::string buf;      ///< reply bytes read so far
  int64_t row = -1;     ///< the request in flight, or -1
  int64_t answered = 0; ///< requests answered since it started
  Clock::time_point deadline;
};

namespace {

constexpr size_t kMaxReply = 1 << 20;

void closeFd(int &fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

/// Blocks SIGPIPE on this thread while it writes to workers that may have
/// exited, so that such a write fails with EPIPE instead of killing us, and
/// discards the SIGPIPEs it raised.
class NoSigpipe {
public:
  NoSigpipe() {
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    wasPending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe, &old);
  }
  ~NoSigpipe() {
    timespec zero{0, 0};
    if (!wasPending)
      while (sigtimedwait(&pipe, nullptr, &zero) > 0) {
      }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

private:
  sigset_t pipe, old;
  bool wasPending = false;
};

/// Whether `pid` has exited, leaving it unreaped so that its process group
/// stays ours to signal; `how` says how it ended.
bool hasExited(pid_t pid, std::string *how = nullptr) {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
    return errno == ECHILD; // reaped elsewhere: gone all the same
  if (info.si_pid != pid)
    return false;
  if (how) {
    int s = info.si_status;
    if (info.si_code == CLD_EXITED)
      *how = "exited with status " + std::to_string(s) +
             (s == 127   ? " (the shell found no such command)"
              : s == 126 ? " (the command is not executable)"
                         : "");
    else
      *how = "was killed by signal " + std::to_string(s) + " (" + strsignal(s) +
             ")";
  }
  return true;
}

/// Waits until every worker of `ws` has exited or `until` passes; returns
/// those still running.
template <typename W>
std::vector<W *> waitExit(std::vector<W *> ws, Clock::time_point until) {
  for (;;) {
    ws.erase(std::remove_if(ws.begin(), ws.end(),
                            [](W *w) { return hasExited(w->pid); }),
             ws.end());
    if (ws.empty() || Clock::now() >= until)
      return ws;
    usleep(5000);
  }
}

/// Writes what `w` still has to receive; false when its stdin is closed.
bool flush(ExternalRewardPool::Worker &w) {
  while (!w.pending.empty()) {
    ssize_t n = ::write(w.in, w.pending.data(), w.pending.size());
    if (n > 0) {
      w.pending.erase(0, size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

/// Reads what `w` wrote so far; false at end of file (or a read error).
bool drain(ExternalRewardPool::Worker &w) {
  char tmp[65536];
  for (;;) {
    ssize_t n = ::read(w.out, tmp, sizeof tmp);
    if (n > 0) {
      w.buf.append(tmp, size_t(n));
      if (w.buf.size() > kMaxReply)
        return true; // the caller reports the overlong line
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

/// The score in one reply line to the request of row `row`, or why the line
/// is not that reply.
std::optional<double> parseReply(const std::string &line, int64_t row,
                                 std::string &why) {
  auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  std::string shown = line.size() > 200 ? line.substr(0, 200) + "..." : line;
  if (j.is_discarded() || !j.is_object()) {
    // Python's json.dumps writes NaN and Infinity, which JSON has not.
    bool nan = line.find("NaN") != std::string::npos ||
               line.find("Infinity") != std::string::npos;
    why = "replied '" + shown + "', which is not a JSON object" +
          (nan ? " (NaN and Infinity are not JSON, and no score may be "
                 "either)"
               : "");
    return std::nullopt;
  }
  auto it = j.find("score");
  if (it == j.end() || !it->is_number()) {
    why = "replied '" + shown + "', which has no number \"score\"";
    return std::nullopt;
  }
  // An echoed row tells a late line of an earlier request from this reply.
  if (auto r = j.find("row");
      r != j.end() && !(r->is_number_integer() && r->get<int64_t>() == row)) {
    why = "replied '" + shown + "' to the request of row " +
          std::to_string(row) +
          " (a line left over from another request? a reply's \"row\", "
          "when it has one, must echo the request's)";
    return std::nullopt;
  }
  double s = it->get<double>();
  // Scores become fp32 tensors.
  if (!std::isfinite(s) || std::abs(s) > double(FLT_MAX)) {
    why = "replied '" + shown + "', whose score is not a finite 32-bit float";
    return std::nullopt;
  }
  return s;
}

} // namespace

ExternalRewardPool::ExternalRewardPool(ExternalRewardOptions options)
    : opts(std::move(options)) {
  if (opts.command.empty())
    throw Error("the reward command is empty");
  if (opts.workers < 1)
    throw Error("the reward command needs at least one worker");
  if (!(opts.timeout > 0))
    throw Error("the reward command's timeout must be positive");
  workers.resize(size_t(opts.workers));
  for (size_t i = 0; i < workers.size(); ++i)
    workers[i].index = int(i);
}

ExternalRewardPool::~ExternalRewardPool() {
  try {
    shutdown();
  } catch (...) {
  }
}

std::string ExternalRewardPool::describe() const {
  return "the reward command '" + opts.command + "'" +
         (opts.directory.empty() ? "" : " (run in " + opts.directory + ")");
}

std::vector<int> ExternalRewardPool::pids() const {
  std::vector<int> out;
  for (const Worker &w : workers)
    if (w.pid > 0)
      out.push_back(w.pid);
  return out;
}

void ExternalRewardPool::start(Worker &w) {
  const char *dir = opts.directory.empty() ? nullptr : opts.directory.c_str();
  struct stat st;
  if (dir && (::stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
    throw Error(describe() + " cannot start: folder '" + opts.directory +
                "' does not exist on this machine; the command runs in the "
                "folder of the .rlhf file that calls it, so compile there or "
                "use absolute paths");
  int toChild[2], fromChild[2];
  if (pipe2(toChild, O_CLOEXEC) != 0)
    throw Error(describe() + " cannot start: pipe: " + std::strerror(errno));
  if (pipe2(fromChild, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(toChild[0]);
    ::close(toChild[1]);
    throw Error(describe() + " cannot start: pipe: " + std::strerror(e));
  }
  // Everything the child needs is made before fork: after it, in a
  // multithreaded process, only async-signal-safe calls are allowed.
  // A simple command is exec'd by the shell, so the verifier itself is the
  // child that PR_SET_PDEATHSIG (kept across exec) ends with this rank; a
  // grandchild under sh would outlive a killed rank.
  const std::string &cmd = opts.command;
  const size_t firstWord = cmd.find_first_of(" \t");
  const bool simple =
      cmd.find_first_of(";&|<>()`$\n\\'\"*?~{}") == std::string::npos &&
      cmd.substr(0, firstWord).find('=') == std::string::npos &&
      cmd.substr(0, firstWord) != "exec";
  const std::string shell = simple ? "exec " + cmd : cmd;
  const char *argv[] = {"sh", "-c", shell.c_str(), nullptr};
  const long maxFd = sysconf(_SC_OPEN_MAX);
  const pid_t parent = getpid();
  static const char chdirFailed[] = "script_reward: cannot enter the folder "
                                    "of the reward command\n";
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(127);
    if (dup2(toChild[0], 0) == toChild[0])
      fcntl(0, F_SETFD, 0);
    if (dup2(fromChild[1], 1) == fromChild[1])
      fcntl(1, F_SETFD, 0);
    // The rank's sockets and the other workers' pipes stay with the rank:
    // a worker holding a sibling's stdin would keep it from seeing EOF.
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
      for (long fd = 3; fd < maxFd; ++fd)
        ::close(int(fd));
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s)
      if (s != SIGKILL && s != SIGSTOP)
        sigaction(s, &dfl, nullptr);
    if (dir && chdir(dir) != 0) {
      ssize_t ignored = ::write(2, chdirFailed, sizeof chdirFailed - 1);
      (void)ignored;
      _exit(127);
    }
    execv("/bin/sh", const_cast<char *const *>(argv));
    _exit(127);
  }
  int forkErr = errno;
  ::close(toChild[0]);
  ::close(fromChild[1]);
  if (pid < 0) {
    ::close(toChild[1]);
    ::close(fromChild[0]);
    throw Error(describe() + " cannot start: fork: " + std::strerror(forkErr));
  }
  setpgid(pid, pid); // also here, so no signal can precede the child's own
  w.pid = pid;
  w.in = toChild[1];
  w.out = fromChild[0];
  fcntl(w.in, F_SETFL, fcntl(w.in, F_GETFL) | O_NONBLOCK);
  fcntl(w.out, F_SETFL, fcntl(w.out, F_GETFL) | O_NONBLOCK);
  w.pending.clear();
  w.buf.clear();
  w.row = -1;
  w.answered = 0;
}

void ExternalRewardPool::stop(const std::vector<Worker *> &ws,
                              bool closeStdin) {
  std::vector<Worker *> live;
  for (Worker *w : ws)
    if (w->pid > 0)
      live.push_back(w);
  std::vector<Worker *> rest = live;
  if (closeStdin) {
    for (Worker *w : rest)
      closeFd(w->in);
    rest = waitExit(rest, after(opts.grace));
  }
  for (Worker *w : rest)
    killpg(w->pid, SIGTERM);
  rest = waitExit(rest, after(opts.grace));
  // SIGKILL to every group, also where the leader exited: nothing the
  // worker started outlives it. Leaders are still unreaped, so their
  // process group ids cannot have been reused.
  for (Worker *w : live)
    killpg(w->pid, SIGKILL);
  for (Worker *w : live) {
    int status = 0;
    while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR) {
    }
    w->pid = -1;
    closeFd(w->in);
    closeFd(w->out);
    w->pending.clear();
    w->buf.clear();
    w->row = -1;
  }
}

void ExternalRewardPool::shutdown() {
  std::vector<Worker *> all;
  for (Worker &w : workers)
    all.push_back(&w);
  stop(all, /*closeStdin=*/true);
}

void ExternalRewardPool::fail(Worker &w, const std::string &reason,
                              std::vector<double> &out) {
  std::string what =
      describe() + ", worker " + std::to_string(w.index) + ", " + reason +
      (w.row >= 0 ? " on row " + std::to_string(w.row) : " between requests");
  if (!opts.fallback) {
    shutdown();
    throw Error(what + "; fix the command (its stderr is above; a worker "
                       "reads requests until its stdin closes), raise "
                       "'timeout' if it is slow, or declare 'default = ...' "
                       "to score such rows and go on");
  }
  char score[32];
  std::snprintf(score, sizeof score, "%g", *opts.fallback);
  std::string msg =
      "warning: " + (opts.where.empty() ? "" : opts.where + ": ") + what +
      "; " +
      (w.row >= 0 ? "scored it " + std::string(score) + " and "
                  : std::string()) +
      "restarted the worker";
  if (w.row >= 0)
    out[size_t(w.row)] = *opts.fallback;
  if (opts.warn) {
    opts.warn(msg);
  } else {
    std::fprintf(stderr, "%s\n", msg.c_str());
    std::fflush(stderr);
  }
  stop({&w}, /*closeStdin=*/false);
  start(w);
  ++restarted;
}

std::vector<double>
ExternalRewardPool::score(const std::vector<std::string> &requests) {
  const size_t N = requests.size();
  std::vector<double> out(N, 0.0);
  if (N == 0)
    return out;
  for (size_t i = 0; i < N; ++i)
    if (requests[i].find('\n') != std::string::npos)
      throw Error("the request for row " + std::to_string(i) +
                  " spans lines; a request is one line of JSON");
  NoSigpipe noSigpipe;
  for (Worker &w : workers)
    if (w.pid < 0)
      start(w);
  size_t next = 0, done = 0;
  // A failed worker: the fallback for its request and a fresh worker, or
  // an exception.
  auto failed = [&](Worker &w, const std::string &reason) {
    bool request = w.row >= 0;
    fail(w, reason, out);
    done += request ? 1 : 0;
  };
  // Why `w` stopped talking: how it ended, if it did within a second.
  auto ended = [&](Worker &w, const std::string &otherwise) {
    std::string how;
    for (auto until = after(std::min(opts.grace, 1.0));;) {
      if (hasExited(w.pid, &how))
        return how;
      if (Clock::now() >= until)
        return otherwise;
      usleep(5000);
    }
  };
  // Takes the complete lines `w` wrote; true while it is still usable.
  auto replies = [&](Worker &w) {
    for (size_t nl;
         w.row >= 0 && (nl = w.buf.find('\n')) != std::string::npos;) {
      std::string line = w.buf.substr(0, nl);
      w.buf.erase(0, nl + 1);
      if (line.find_first_not_of(" \t\r") == std::string::npos)
        continue;
      std::string why;
      std::optional<double> s = parseReply(line, w.row, why);
      if (s && w.buf.find_first_not_of(" \t\r\n") != std::string::npos) {
        why = "wrote more than one line for one request";
        s.reset();
      }
      if (!s) {
        failed(w, why + " (reply with one line such as {\"score\": 1.0} "
                        "and write logs to stderr)");
        return false;
      }
      out[size_t(w.row)] = *s;
      w.row = -1;
      ++w.answered;
      ++done;
    }
    if (w.row >= 0 && w.buf.size() > kMaxReply) {
      failed(w, "wrote more than 1 MiB without a newline");
      return false;
    }
    return true;
  };
  const double timeout = opts.timeout;
  Clock::time_point beat = after(opts.heartbeatInterval);
  while (done < N) {
    if (opts.heartbeat && Clock::now() >= beat) {
      opts.heartbeat();
      beat = after(opts.heartbeatInterval);
    }
    for (Worker &w : workers) {
      while (w.row < 0 && next < N) {
        // A worker that served requests and then wrote or ended while it
        // had none fails between requests; one that never answered fails
        // on the request it is given, so that a broken command cannot loop.
        bool open = drain(w);
        bool stray = w.buf.find_first_not_of(" \t\r\n") != std::string::npos;
        if (w.answered == 0 || (open && !stray))
          w.row = int64_t(next++);
        if (stray) {
          failed(w, "wrote '" + w.buf.substr(0, 200) +
                        "' without a request (write one line per request "
                        "to stdout and logs to stderr)");
          continue;
        }
        w.buf.clear();
        if (!open) {
          failed(w, ended(w, "closed its stdout") +
                        (w.row >= 0 ? " before replying" : ""));
          continue;
        }
        w.pending = requests[size_t(w.row)] + "\n";
        w.deadline = after(timeout);
        if (!flush(w))
          failed(w, ended(w, "closed its stdin") + " before replying");
      }
    }
    std::vector<pollfd> fds;
    std::vector<Worker *> owner;
    Clock::time_point first = Clock::time_point::max();
    for (Worker &w : workers) {
      if (w.row < 0)
        continue;
      fds.push_back({w.out, POLLIN, 0});
      owner.push_back(&w);
      if (!w.pending.empty()) {
        fds.push_back({w.in, POLLOUT, 0});
        owner.push_back(&w);
      }
      first = std::min(first, w.deadline);
    }
    if (opts.heartbeat)
      first = std::min(first, beat);
    if (fds.empty())
      continue; // every failed request was scored by the fallback
    auto wait =
        std::chrono::ceil<std::chrono::milliseconds>(first - Clock::now());
    int ms = int(std::clamp<int64_t>(wait.count(), 0, 1000));
    if (::poll(fds.data(), fds.size(), ms) < 0 && errno != EINTR)
      throw Error(describe() + ": poll: " + std::strerror(errno));
    for (size_t i = 0; i < fds.size(); ++i) {
      Worker &w = *owner[i];
      if (!fds[i].revents || w.row < 0)
        continue;
      if (fds[i].fd == w.in) {
        if (!flush(w))
          failed(w, ended(w, "closed its stdin") + " before replying");
        continue;
      }
      bool open = drain(w);
      if (replies(w) && !open && w.row >= 0)
        failed(w, ended(w, "closed its stdout") + " before replying");
    }
    // A reply may sit unread behind a slow stop of another worker: read
    // before declaring a timeout.
    auto now = Clock::now();
    for (Worker &w : workers)
      if (w.row >= 0 && now >= w.deadline) {
        bool open = drain(w);
        if (!replies(w) || w.row < 0)
          continue;
        // Text without its newline is a reply the worker did not end (a
        // print without flush, or end="").
        std::string partial =
            w.buf.find_first_not_of(" \t\r") == std::string::npos
                ? ""
                : " (it wrote '" + w.buf.substr(0, 200) +
                      "' but no newline after it; end each reply with one "
                      "and flush)";
        failed(w, open ? "gave no reply within " + seconds(timeout) + partial
                       : ended(w, "closed its stdout") + " before replying" +
                             partial);
      }
  }
  return out;
}
