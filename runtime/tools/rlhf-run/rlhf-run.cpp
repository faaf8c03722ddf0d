//===- rlhf-run.cpp - local launcher for rlhf workers ---------------------===//
//
// Spawns N workers of one program with the torchrun-style rendezvous
// variables, prefixes their output with the rank, forwards SIGINT/SIGTERM,
// and stops everyone as soon as one worker fails, so a job never hangs on a
// dead rank. Torch-free on purpose: it starts instantly.
//
// Across nodes, one rlhf-run per node (--nnodes, --node-rank, or a Slurm
// step) runs that node's ranks, and the launchers watch each other through
// a NodeLink, so a failed worker or a dead node anywhere ends the job on
// every node.
//
//===----------------------------------------------------------------------===//

#include "NodeLink.h"
#include "Slurm.h"
#include "Supervise.h"
#include "Workers.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace llvm;
using namespace rlhfrun;
using Clock = std::chrono::steady_clock;

static cl::OptionCategory runCat("rlhf-run options");
static cl::opt<unsigned>
    numWorkers("n",
               cl::desc("Number of worker processes on this node, one per "
                        "device (default 1)"),
               cl::value_desc("N"), cl::init(1), cl::Prefix, cl::cat(runCat));
static cl::alias numWorkersLong("nproc", cl::aliasopt(numWorkers),
                                cl::desc("Alias for -n"), cl::cat(runCat));
static cl::opt<unsigned> maxLocal(
    "max-local-workers",
    cl::desc("Most workers this node may start (default: 4 per core, at "
             "least 16): each loads LibTorch, and a typo in -n would "
             "otherwise fork until the node runs out of memory"),
    cl::value_desc("N"), cl::init(0), cl::cat(runCat));
static cl::opt<unsigned> numNodes(
    "nnodes",
    cl::desc("Number of nodes, each running rlhf-run with the same options "
             "(default 1, or the Slurm step's)"),
    cl::init(1), cl::cat(runCat));
static cl::opt<unsigned> nodeRankOpt(
    "node-rank",
    cl::desc("This node's index, 0..nnodes-1: it runs ranks node-rank*N .. "
             "node-rank*N+N-1 (default 0)"),
    cl::init(0), cl::cat(runCat));
static cl::opt<std::string> masterAddr(
    "master-addr",
    cl::desc("Address of node 0, where rank 0 hosts the store (default "
             "127.0.0.1; required with --nnodes > 1)"),
    cl::init("127.0.0.1"), cl::cat(runCat));
static cl::opt<unsigned> masterPort(
    "master-port",
    cl::desc("Rendezvous port (default 0: rank 0 takes a free one and "
             "tells the others through a file in /tmp; required with "
             "--nnodes > 1)"),
    cl::init(0), cl::cat(runCat));
static cl::opt<unsigned>
    monitorPort("monitor-port",
                cl::desc("Port on node 0 where the launchers watch each other "
                         "(default --master-port + 1)"),
                cl::init(0), cl::cat(runCat));
static cl::opt<unsigned> nodeTimeout(
    "node-timeout",
    cl::desc("Seconds without a heartbeat before another node counts as "
             "dead (default 10)"),
    cl::init(10), cl::cat(runCat));
static cl::opt<unsigned> joinTimeout(
    "join-timeout",
    cl::desc("Seconds the nodes' launchers wait for each other to start "
             "(default 300)"),
    cl::init(300), cl::cat(runCat));
static cl::opt<bool>
    dryRun("dry-run", cl::desc("Print each local worker's variables and exit"),
           cl::cat(runCat));
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

/// Where this node's workers sit in the job, from the options or Slurm.
struct Launch {
  unsigned nnodes = 1, nodeRank = 0, nproc = 1;
  std::string masterAddr;
  unsigned masterPort = 0, monitorPort = 0;
  bool multi() const { return nnodes > 1; }
  unsigned worldSize() const { return nnodes * nproc; }
  unsigned firstRank() const { return nodeRank * nproc; }
} launch;

/// Removes the port folders of launchers that died without cleaning up
/// (SIGKILL): their names carry the launcher's pid.
void sweepStalePortDirs() {
  DIR *tmp = opendir("/tmp");
  if (!tmp)
    return;
  while (dirent *e = readdir(tmp)) {
    unsigned long pid = 0;
    int used = 0;
    if (std::sscanf(e->d_name, "rlhf-run-%lu-%*6c%n", &pid, &used) != 1 ||
        e->d_name[used] != 0 || pid == 0)
      continue;
    std::string dir = std::string("/tmp/") + e->d_name;
    struct stat st;
    if (lstat(dir.c_str(), &st) || !S_ISDIR(st.st_mode) ||
        st.st_uid != getuid() || kill(pid_t(pid), 0) == 0 || errno != ESRCH)
      continue;
    unlink((dir + "/port").c_str());
    rmdir(dir.c_str());
  }
  closedir(tmp);
}

/// Where rank 0 publishes the port the kernel gave its store (MASTER_PORT=0);
/// removed when rlhf-run exits. Choosing a free port here and releasing it
/// would race with every other job starting on the host.
struct PortFile {
  std::string dir, path;
  PortFile() {
    sweepStalePortDirs();
    std::string tmpl = "/tmp/rlhf-run-" + std::to_string(getpid()) + "-XXXXXX";
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

Error usage(const Twine &msg) {
  return createStringError(inconvertibleErrorCode(), msg);
}

/// Fills `launch` from the options, or from Slurm when the options leave
/// the nodes to it, and checks them.
Error resolveLaunch() {
  launch.nproc = numWorkers;
  launch.nnodes = numNodes;
  launch.nodeRank = nodeRankOpt;
  launch.masterAddr = masterAddr;
  launch.masterPort = masterPort;
  bool fromSlurm = false;
  if (!numNodes.getNumOccurrences() && !nodeRankOpt.getNumOccurrences() &&
      !masterAddr.getNumOccurrences()) {
    Expected<std::optional<SlurmStep>> step = readSlurmStep();
    if (!step)
      return step.takeError();
    // A one-node step is an ordinary local launch.
    if (*step && (*step)->nnodes > 1) {
      const SlurmStep &s = **step;
      fromSlurm = true;
      launch.nnodes = s.nnodes;
      launch.nodeRank = s.nodeRank;
      launch.masterAddr = s.masterAddr;
      std::string line = "rlhf-run: from Slurm: " + s.summary;
      if (!masterPort.getNumOccurrences() && s.masterPort) {
        launch.masterPort = s.masterPort;
        line += formatv(", port {0} (from {1})", s.masterPort, s.portFrom);
      }
      errs() << line << "\n";
    }
  }
  if (launch.nnodes == 0)
    return usage("--nnodes must be at least 1");
  if (launch.nodeRank >= launch.nnodes)
    return usage(formatv("--node-rank {0} is out of range: --nnodes {1} "
                         "makes nodes 0..{2}",
                         launch.nodeRank, launch.nnodes, launch.nnodes - 1));
  if (uint64_t(launch.nnodes) * launch.nproc > (1u << 20))
    return usage(formatv("--nnodes {0} x -n {1} workers is more than {2}",
                         launch.nnodes, launch.nproc, 1u << 20));
  if (launch.masterPort > 65535)
    return usage(formatv("--master-port {0} is not a port", launch.masterPort));
  if (!launch.multi())
    return Error::success();
  if (!fromSlurm && !masterAddr.getNumOccurrences())
    return usage(formatv("--nnodes {0} needs --master-addr, the address of "
                         "node 0 (where rank 0 hosts the store)",
                         launch.nnodes));
  if (launch.masterPort == 0)
    return usage(formatv("--nnodes {0} needs --master-port{1}: ranks on other "
                         "nodes cannot read the file where rank 0 would "
                         "publish a port of its choosing",
                         launch.nnodes, fromSlurm ? " (or MASTER_PORT)" : ""));
  launch.monitorPort =
      monitorPort ? unsigned(monitorPort) : launch.masterPort + 1;
  if (launch.monitorPort > 65535)
    return usage(formatv("--master-port {0} leaves no port above it for the "
                         "launchers; pass --monitor-port",
                         launch.masterPort));
  if (launch.monitorPort == launch.masterPort)
    return usage("--monitor-port must differ from --master-port");
  if (nodeTimeout == 0 || joinTimeout == 0)
    return usage("--node-timeout and --join-timeout must be at least 1");
  return Error::success();
}

/// The variables a worker gets, named as torchrun names them (GROUP_RANK is
/// the node's index; NODE_RANK is the name Lightning reads).
WorkerEnv workerEnv(const Worker &w, const std::string &portFile) {
  auto str = [](unsigned x) { return std::to_string(x); };
  WorkerEnv env = {{"MASTER_ADDR", launch.masterAddr},
                   {"MASTER_PORT", str(launch.masterPort)}};
  if (!portFile.empty())
    env.push_back({"RLHF_RENDEZVOUS_FILE", portFile});
  env.push_back({"WORLD_SIZE", str(launch.worldSize())});
  env.push_back({"RANK", str(w.rank)});
  env.push_back({"LOCAL_RANK", str(w.localRank)});
  env.push_back({"LOCAL_WORLD_SIZE", str(launch.nproc)});
  env.push_back({"GROUP_RANK", str(launch.nodeRank)});
  env.push_back({"GROUP_WORLD_SIZE", str(launch.nnodes)});
  env.push_back({"NODE_RANK", str(launch.nodeRank)});
  return env;
}

std::string rankRange(unsigned first, unsigned count) {
  if (count == 1)
    return formatv("rank {0}", first);
  return formatv("ranks {0}-{1}", first, first + count - 1);
}

void printDryRun(std::vector<Worker> &workers) {
  std::string store =
      launch.masterPort
          ? formatv("{0}:{1}", launch.masterAddr, launch.masterPort).str()
          : launch.masterAddr + " (a port rank 0 picks)";
  if (launch.multi())
    outs() << formatv("rlhf-run: node {0} of {1}: {2} of {3}, store at {4}, "
                      "launchers meet at port {5}\n",
                      launch.nodeRank, launch.nnodes,
                      rankRange(launch.firstRank(), launch.nproc),
                      launch.worldSize(), store, launch.monitorPort);
  else
    outs() << formatv("rlhf-run: one node: {0}, store at {1}\n",
                      rankRange(0, launch.nproc), store);
  for (auto &w : workers) {
    outs() << "[rank " << w.rank << "]";
    for (auto &[name, value] :
         workerEnv(w, launch.masterPort ? "" : "/tmp/rlhf-run-PID-XXXXXX/port"))
      outs() << " " << name << "=" << value;
    outs() << "\n";
  }
}

} // namespace

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(runCat);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "rlhf-run " << RLHFC_VERSION << " (rlhfc's launcher)\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "rlhf-run: launch N local workers of an rlhfc-compiled program\n\n"
      "  rlhf-run -n 4 ./ppo --steps 20\n"
      "  rlhf-run --nnodes 2 --node-rank R --master-addr HOST0 "
      "--master-port 29500 -n 8 ./ppo\n"
      "  srun --ntasks-per-node=1 rlhf-run -n 8 ./ppo\n\n"
      "Each worker gets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, "
      "LOCAL_RANK,\n"
      "LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE and NODE_RANK, the "
      "variables\n"
      "torchrun and Slurm wrappers set, so a compiled program runs unchanged "
      "on a\ncluster. Output lines are\n"
      "prefixed with '[rank R]'. When a worker fails, the others get SIGTERM,\n"
      "then SIGKILL after --grace seconds, and rlhf-run exits with the "
      "failing\n"
      "worker's code. Across nodes, run one rlhf-run per node; the launchers\n"
      "watch each other, so a failed worker or a dead node ends the job on\n"
      "every node. Inside a Slurm step the nodes come from Slurm. SIGUSR1\n"
      "asks the workers to save a checkpoint after the step in progress and\n"
      "stop (exit 75; continue with --resume): give it before a time limit,\n"
      "as with sbatch --signal=USR1@300. Options\n"
      "after <program> go to the program (--steps, --out, --resume,\n"
      "--export-hf DIR, ...; see <program> --help).\n");
  if (numWorkers == 0) {
    errs() << "rlhf-run: error: -n must be at least 1\n";
    return 2;
  }
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned limit =
      maxLocal ? unsigned(maxLocal) : std::max(16u, 4 * cores);
  if (numWorkers > limit) {
    errs() << formatv("rlhf-run: error: -n {0} would start {0} workers on "
                      "this node ({1} cores), more than the {2} allowed; a "
                      "compiled program runs one worker per GPU of its "
                      "cluster (see <program> --help), or pass "
                      "--max-local-workers={0}\n",
                      unsigned(numWorkers), cores, limit);
    return 2;
  }
  if (Error e = resolveLaunch()) {
    errs() << "rlhf-run: error: " << toString(std::move(e)) << "\n";
    return 2;
  }
  std::vector<Worker> workers(launch.nproc);
  for (unsigned l = 0; l < launch.nproc; ++l) {
    workers[l].rank = int(launch.firstRank() + l);
    workers[l].localRank = l;
  }
  if (dryRun) {
    printDryRun(workers);
    return 0;
  }
  // One error rather than one per worker (for a path, execvp's own test: an
  // executable regular file). Across nodes the workers' own
  // failure ends the job on every node; an early exit here would leave the
  // other launchers waiting to join.
  const bool onPath = program.find('/') == std::string::npos;
  if (!launch.multi() && !executable(program)) {
    errs() << "rlhf-run: error: cannot execute '" << program
           << "': no such executable file" << (onPath ? " on PATH" : "")
           << "; compile one with rlhfc PROG.rlhf -o PROG and run ./PROG\n";
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
  // A request, not an end: the workers checkpoint and stop (Supervise.cpp).
  sigaction(SIGUSR1, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::optional<PortFile> portFile;
  if (!launch.masterPort) {
    portFile.emplace();
    if (portFile->dir.empty()) {
      errs() << "rlhf-run: error: cannot create a directory in /tmp for the "
                "rendezvous port: "
             << strerror(errno) << "; pass --master-port\n";
      return 1;
    }
  }

  std::unique_ptr<NodeLink> link;
  const bool multi = launch.multi();
  if (multi) {
    LinkConfig lc;
    lc.nnodes = launch.nnodes;
    lc.nodeRank = launch.nodeRank;
    lc.nproc = launch.nproc;
    lc.masterAddr = launch.masterAddr;
    lc.port = launch.monitorPort;
    lc.nodeTimeout = std::chrono::seconds(nodeTimeout);
    lc.joinTimeout = std::chrono::seconds(joinTimeout);
    // The arguments, not the program's path: nodes may name one file
    // differently (./prog, /shared/prog).
    lc.programArgs.assign(programArgs.begin(), programArgs.end());
    auto l = launch.nodeRank == 0 ? NodeLink::listen(lc)
                                  : NodeLink::join(lc, signalPipe[0]);
    if (!l) {
      std::string msg = toString(l.takeError());
      unsigned char sig = 0;
      if (msg == "interrupted" && read(signalPipe[0], &sig, 1) == 1) {
        errs() << "rlhf-run: stopped by signal " << int(sig) << "\n";
        return 128 + sig;
      }
      errs() << "rlhf-run: error: " << msg << "\n";
      return 1;
    }
    link = std::move(*l);
  }

  std::vector<std::string> args{program};
  args.insert(args.end(), programArgs.begin(), programArgs.end());
  for (auto &w : workers) {
    if (!spawn(w, args, workerEnv(w, portFile ? portFile->path : ""))) {
      errs() << "rlhf-run: error: cannot start rank " << w.rank << ": "
             << strerror(errno) << "\n";
      signalAll(workers, SIGKILL);
      if (link) {
        link->reportFailure(w.rank, 127 << 8);
        link->close(std::chrono::seconds(1));
      }
      return 1;
    }
  }

  SuperviseConfig sc;
  sc.nodeRank = launch.nodeRank;
  sc.multi = multi;
  sc.graceSeconds = graceSeconds;
  sc.prefix = !noPrefix;
  sc.signalFd = signalPipe[0];
  return supervise(workers, link.get(), sc);
}
