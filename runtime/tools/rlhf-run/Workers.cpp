//===- Workers.cpp - a launcher's worker processes and their output -------===//

#include "Workers.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

using namespace llvm;
using namespace rlhfrun;

void rlhfrun::emit(const Worker &w, Stream &s, StringRef line, bool prefix) {
  raw_ostream &os = s.toStderr ? errs() : outs();
  if (prefix)
    os << "[rank " << w.rank << "] ";
  os << line << "\n";
  os.flush();
}

bool rlhfrun::pump(Worker &w, Stream &s, bool prefix) {
  char buf[4096];
  ssize_t n = read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return true;
  if (n <= 0) {
    if (!s.pending.empty())
      emit(w, s, s.pending, prefix);
    s.pending.clear();
    close(s.fd);
    s.fd = -1;
    return false;
  }
  s.pending.append(buf, n);
  size_t start = 0, nl;
  while ((nl = s.pending.find('\n', start)) != std::string::npos) {
    emit(w, s, StringRef(s.pending).slice(start, nl), prefix);
    start = nl + 1;
  }
  s.pending.erase(0, start);
  return true;
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
