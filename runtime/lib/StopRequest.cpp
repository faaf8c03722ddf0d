//===- StopRequest.cpp - SIGUSR1: checkpoint after this step and stop -----===//
//
// A cluster's scheduler warns a job before its time runs out (Slurm's
// `--signal=USR1@300`); rlhf-run forwards SIGUSR1 to every worker, and the
// run then saves a checkpoint after the step in progress and exits with
// RLHF_EXIT_STOPPED, so `--resume` loses no step. The signal is blocked in
// every thread and taken by one that waits for it: a handler could run on
// any thread (Gloo's, NCCL's, CUDA's) and break its system calls with
// EINTR.
//
//===----------------------------------------------------------------------===//

#include "ProgramState.h"

#include <atomic>
#include <csignal>
#include <mutex>
#include <pthread.h>
#include <thread>

using namespace rlhf::exec;

namespace {
std::atomic<bool> requested{false};
} // namespace

void rlhf::exec::watchStopRequests() {
  static std::once_flag once;
  std::call_once(once, [] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    // Threads started from here on inherit the mask.
    if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0)
      return;
    std::thread([set] {
      for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) == 0 && sig == SIGUSR1)
          requested.store(true);
      }
    }).detach();
  });
}

bool rlhf::exec::stopRequested() { return requested.load(); }
