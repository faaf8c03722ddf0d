//===- Rendezvous.cpp - process identity from launcher env vars -----------===//

#include "rlhf/runtime/Rendezvous.h"
#include "rlhf/runtime/Error.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <thread>

using namespace rlhf;

static long long readIntEnv(const char *name, long long fallback, bool required,
                            long long lo, long long hi) {
  const char *v = std::getenv(name);
  if (!v || !*v) {
    if (required)
      throw Error(std::string("environment variable ") + name +
                  " is not set; launch workers with `rlhf-run -n N PROGRAM` "
                  "or set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE");
    return fallback;
  }
  char *end = nullptr;
  errno = 0;
  long long x = std::strtoll(v, &end, 10);
  if (errno || end == v || *end != '\0' || x < lo || x > hi)
    throw Error(std::string("environment variable ") + name + "='" + v +
                "' is not an integer in [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  return x;
}

RendezvousConfig RendezvousConfig::fromEnv() {
  RendezvousConfig c;
  const bool distributed = std::getenv("WORLD_SIZE") != nullptr;
  c.worldSize = readIntEnv("WORLD_SIZE", 1, false, 1, 1 << 20);
  c.rank = readIntEnv("RANK", 0, distributed, 0, c.worldSize - 1);
  c.localRank = readIntEnv("LOCAL_RANK", c.rank, false, 0, 1 << 20);
  c.localWorldSize =
      readIntEnv("LOCAL_WORLD_SIZE", c.worldSize, false, 1, 1 << 20);
  if (const char *a = std::getenv("MASTER_ADDR"); a && *a)
    c.masterAddr = a;
  else if (distributed && c.worldSize > 1)
    throw Error("environment variable MASTER_ADDR is not set; it must name "
                "the host of rank 0");
  if (const char *f = std::getenv("RLHF_RENDEZVOUS_FILE"); f && *f)
    c.portFile = f;
  c.masterPort = readIntEnv("MASTER_PORT", 29500,
                            distributed && c.worldSize > 1, 0, 65535);
  if (c.masterPort == 0 && c.portFile.empty())
    throw Error(
        "environment variable MASTER_PORT=0 needs RLHF_RENDEZVOUS_FILE, "
        "where rank 0 publishes the port it takes (rlhf-run sets both); "
        "otherwise give a port");
  if (const char *a = std::getenv("TORCHELASTIC_USE_AGENT_STORE"))
    c.agentStore = std::string(a) == "True" || std::string(a) == "1";
  c.timeout = std::chrono::milliseconds(
      readIntEnv("RLHF_COMM_TIMEOUT_MS", c.timeout.count(), false, 1,
                 std::numeric_limits<int>::max()));
  c.watchdogStall = std::chrono::seconds(
      readIntEnv("RLHF_WATCHDOG_STALL_S", c.watchdogStall.count() / 1000, false,
                 1, 1 << 20));
  return c;
}

void rlhf::setHostThreads(const RendezvousConfig &cfg) {
  // A valid OMP_NUM_THREADS is the user's; OpenMP only warns about an
  // invalid one and then runs every rank on every core.
  if (const char *omp = std::getenv("OMP_NUM_THREADS"); omp && *omp) {
    char *end = nullptr;
    long n = std::strtol(omp, &end, 10);
    if (*end || n < 1)
      throw Error(std::string("OMP_NUM_THREADS='") + omp +
                  "' is not a positive integer; set it to the threads per "
                  "rank, or unset it (rlhf-run then gives each rank an equal "
                  "share of the cores)");
    return;
  }
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(std::max(1, cores / std::max(1, cfg.localWorldSize)));
}
