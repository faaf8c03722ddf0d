//===- NodeLink.h - launchers of a job watch each other ---------*- C++ -*-===//
//
// Node 0's launcher listens on a TCP port (--master-port + 1 unless
// --monitor-port) and every other node's launcher connects to it: a star of
// line-based messages. Both ends send a heartbeat every second, so a
// launcher killed outright (the kernel closes its socket: noticed at once)
// or a node that vanished (silence past --node-timeout) ends the job on
// every node, naming the node. Node 0 relays worker failures, lost nodes
// and signals to the other nodes, and tells them when every node is done.
//
// Why a channel of its own rather than the workers' TCPStore: the store
// lives in rank 0, a worker that may be the process that died, its clients
// only notice a dead peer at their next collective's timeout, and speaking
// c10d's protocol would put torch into the launcher.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUN_NODELINK_H
#define RLHF_RUN_NODELINK_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <memory>
#include <poll.h>
#include <string>
#include <vector>

namespace rlhfrun {

struct LinkConfig {
  unsigned nnodes = 1;
  unsigned nodeRank = 0;
  unsigned nproc = 1; ///< workers per node
  std::string masterAddr;
  unsigned port = 0; ///< where node 0's launcher listens
  std::chrono::seconds nodeTimeout{10};
  std::chrono::seconds joinTimeout{300};
  /// The program's arguments, which every node must run alike: a mismatch
  /// (another --steps on one node) is refused when the node joins rather
  /// than found at the workers' first collective's timeout.
  std::vector<std::string> programArgs;
};

struct NodeEvent {
  enum Kind {
    WorkerFailed, ///< a worker on another node failed: node, rank, status
    Error,        ///< the job cannot go on: message (names the node)
    Signal,       ///< another node's launcher got signal `status`
    Stopped,      ///< a worker on another node is stopped: node, rank
    JobDone,      ///< every node's workers exited 0
  } kind;
  unsigned node = 0;
  int rank = -1;
  int status = 0;
  std::string message;
  /// Error only: the peer said goodbye before closing, so it stopped on
  /// purpose, after telling us why (a failure or a signal).
  bool orderly = false;
};

/// "node 1 (ranks 2-3)".
std::string describeNode(unsigned node, unsigned nproc);

class NodeLink {
public:
  virtual ~NodeLink();

  /// Node 0: listens for the other nodes' launchers.
  static llvm::Expected<std::unique_ptr<NodeLink>>
  listen(const LinkConfig &cfg);
  /// Other nodes: connects to node 0's launcher, retrying until
  /// cfg.joinTimeout, and introduces itself. Gives up early when
  /// `interruptFd` becomes readable (a signal arrived).
  static llvm::Expected<std::unique_ptr<NodeLink>> join(const LinkConfig &cfg,
                                                        int interruptFd);

  /// Appends the descriptors to poll; `step` gets the same ones back.
  void addPollFds(std::vector<pollfd> &fds);
  /// Reads, writes, sends heartbeats and checks deadlines; appends what
  /// happened. `fds` is the slice addPollFds added, after poll.
  void step(llvm::ArrayRef<pollfd> fds, std::vector<NodeEvent> &events);

  /// A local worker failed: tell the other nodes.
  void reportFailure(int rank, int status) {
    report({NodeEvent::WorkerFailed, 0, rank, status});
  }
  /// A local worker is stopped (SIGSTOP, a debugger) as the job fails:
  /// every node names it, not only the one whose console shows it.
  void reportStopped(int rank) { report({NodeEvent::Stopped, 0, rank, 0}); }
  /// This launcher got a signal: the other nodes forward it too.
  void reportSignal(int sig) { report({NodeEvent::Signal, 0, -1, sig}); }
  /// Every local worker exited 0. A JobDone event follows once all have.
  virtual void reportDone() = 0;
  /// Says goodbye and closes, waiting at most `bound` for the peers to read
  /// it and close their ends. Stopped-rank notes read meanwhile (from a
  /// node that decided after this one) go to `late`.
  void close(std::chrono::milliseconds bound,
             std::vector<NodeEvent> *late = nullptr);

protected:
  struct Peer;
  explicit NodeLink(const LinkConfig &cfg);
  void send(Peer &p, const std::string &line);
  void broadcast(const std::string &line, const Peer *except = nullptr);
  virtual void onLine(Peer &p, llvm::StringRef line,
                      std::vector<NodeEvent> &events) = 0;
  virtual void onClosed(Peer &p, std::vector<NodeEvent> &events) = 0;
  virtual void onTick(std::vector<NodeEvent> &events) = 0;
  /// Closes the connection; onClosed reports it at the end of the step.
  void drop(Peer &p, const std::string &why);
  /// Passes each complete line of `p`'s input that `accept` takes to
  /// onLine, and keeps the unfinished rest.
  void dispatchLines(
      Peer &p, std::vector<NodeEvent> &events,
      llvm::function_ref<bool(llvm::StringRef)> accept = [](llvm::StringRef) {
        return true;
      });

  /// Sends a local worker's event to the other nodes (eventLine; node 0's
  /// name its node, 0).
  void report(NodeEvent e);

  LinkConfig cfg;
  bool hub = false; ///< node 0's: its events carry its node number
  int listenFd = -1;
  std::vector<std::unique_ptr<Peer>> peers;
  std::vector<Peer *> polled; ///< what addPollFds added, in order
  std::chrono::steady_clock::time_point nextHeartbeat;
};

} // namespace rlhfrun

#endif // RLHF_RUN_NODELINK_H
