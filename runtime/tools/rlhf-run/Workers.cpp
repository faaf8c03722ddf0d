//===- Workers.cpp - a launcher's worker processes and their output -------===//

#include "Workers.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

using namespace llvm;
using namespace rlhfrun;

bool rlhfrun::spawn(Worker &w, const std::vector<std::string> &argv,
                    const WorkerEnv &env) {
  std::vector<char *> cargv;
  for (const std::string &a : argv)
    cargv.push_back(const_cast<char *>(a.c_str()));
  cargv.push_back(nullptr);
  int outp[2], errp[2];
  if (pipe(outp))
    return false;
  // Close what this worker opened, keeping errno for the caller's message.
  auto closeAll = [&](bool both) {
    int saved = errno;
    close(outp[0]);
    close(outp[1]);
    if (both) {
      close(errp[0]);
      close(errp[1]);
    }
    errno = saved;
  };
  if (pipe(errp)) {
    closeAll(false);
    return false;
  }
  [[maybe_unused]] pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    closeAll(true);
    return false;
  }
  if (pid == 0) {
    // Own process group: a terminal ^C reaches rlhf-run, which forwards it.
    setpgid(0, 0);
#ifdef __linux__
    // A launcher killed outright takes its workers along, so a node whose
    // launcher died holds no half-job; the check covers a launcher that
    // died before the prctl.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(1);
#endif
    dup2(outp[1], STDOUT_FILENO);
    dup2(errp[1], STDERR_FILENO);
    close(outp[0]);
    close(outp[1]);
    close(errp[0]);
    close(errp[1]);
    for (auto &[name, value] : env)
      setenv(name, value.c_str(), 1);
    execvp(cargv[0], cargv.data());
    dprintf(STDERR_FILENO, "rlhf-run: cannot execute '%s': %s\n", cargv[0],
            strerror(errno));
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

bool rlhfrun::executable(const std::string &program) {
  if (program.find('/') != std::string::npos)
    return access(program.c_str(), X_OK) == 0 &&
           sys::fs::is_regular_file(program);
  // LLVM's lookup skips empty entries, which execvp reads as ".".
  const char *path = getenv("PATH");
  SmallVector<StringRef, 16> dirs;
  StringRef(path ? path : "/bin:/usr/bin").split(dirs, ':');
  for (StringRef &d : dirs)
    if (d.empty())
      d = ".";
  return bool(sys::findProgramByName(program, dirs));
}

namespace {

/// `line` with "rank R" for this rank's number R as "rank *".
std::string withoutRank(StringRef line, int rank) {
  std::string out, me = "rank " + std::to_string(rank);
  size_t at = 0, hit;
  while ((hit = line.find(me, at)) != StringRef::npos) {
    size_t end = hit + me.size();
    out += line.slice(at, hit).str();
    if (end < line.size() && isdigit(static_cast<unsigned char>(line[end])))
      out += me; // rank 1 in "rank 12"
    else
      out += "rank *";
    at = end;
  }
  return out + line.substr(at).str();
}

} // namespace

void rlhfrun::emit(Worker &w, Stream &s, StringRef line, bool prefix,
                   RepeatedErrors &repeated) {
  if (s.toStderr && line.contains("error:")) {
    if (w.firstError.empty())
      w.firstError = line.str();
    std::string key = withoutRank(line, w.rank);
    for (size_t i = 0; i < repeated.printed.size(); ++i)
      if (repeated.printed[i].first == key &&
          repeated.printed[i].second != w.rank) {
        repeated.heldBack[i].push_back(w.rank);
        return;
      }
    repeated.printed.push_back({key, w.rank});
    repeated.heldBack.emplace_back();
  }
  raw_ostream &os = s.toStderr ? errs() : outs();
  if (prefix)
    os << "[rank " << w.rank << "] ";
  os << line << "\n";
  os.flush();
}

bool rlhfrun::pump(Worker &w, Stream &s, bool prefix,
                   RepeatedErrors &repeated) {
  char buf[4096];
  ssize_t n = read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return true;
  if (n <= 0) {
    if (!s.pending.empty())
      emit(w, s, s.pending, prefix, repeated);
    s.pending.clear();
    close(s.fd);
    s.fd = -1;
    return false;
  }
  s.pending.append(buf, n);
  size_t start = 0, nl;
  while ((nl = s.pending.find('\n', start)) != std::string::npos) {
    emit(w, s, StringRef(s.pending).slice(start, nl), prefix, repeated);
    start = nl + 1;
  }
  s.pending.erase(0, start);
  return true;
}

void rlhfrun::noteRepeatedErrors(const RepeatedErrors &repeated) {
  for (size_t i = 0; i < repeated.printed.size(); ++i) {
    std::vector<int> ranks = repeated.heldBack[i];
    if (ranks.empty())
      continue;
    std::sort(ranks.begin(), ranks.end());
    std::string list;
    for (size_t k = 0; k < ranks.size(); ++k)
      list += (k == 0                  ? ""
               : k + 1 == ranks.size() ? " and "
                                       : ", ") +
              std::to_string(ranks[k]);
    errs() << formatv("rlhf-run: note: rank{0} {1} reported the same error "
                      "as rank {2}\n",
                      ranks.size() == 1 ? "" : "s", list,
                      repeated.printed[i].second);
  }
}

std::string rlhfrun::describe(int status) {
  if (WIFEXITED(status))
    return formatv("exited with code {0}", WEXITSTATUS(status)).str();
  if (WIFSIGNALED(status))
    return formatv("was killed by signal {0} ({1})", WTERMSIG(status),
                   strsignal(WTERMSIG(status)))
        .str();
  return "stopped";
}

int rlhfrun::exitCodeOf(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

void rlhfrun::signalAll(std::vector<Worker> &ws, int sig) {
  for (auto &w : ws)
    if (w.running)
      kill(-w.pid, sig);
}
