//===- Communicator.h - collectives behind one interface --------*- C++ -*-===//
//
// One interface for the Gloo (CPU) and NCCL (CUDA) backends. Every call has a
// timeout, so a dead peer surfaces as an rlhf::Error instead of a hang.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_COMMUNICATOR_H
#define RLHF_RUNTIME_COMMUNICATOR_H

#include "rlhf/runtime/Rendezvous.h"

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>

namespace rlhf {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char *backendName() const = 0;

  /// In-place sum across all ranks.
  virtual void allReduceSum(at::Tensor &tensor) = 0;
  virtual void broadcast(at::Tensor &tensor, int root) = 0;
  /// Concatenates every rank's `input` (same shape everywhere) along dim 0.
  virtual at::Tensor allGather(const at::Tensor &input) = 0;
  /// Sums every rank's `input` (same shape everywhere, dim 0 a multiple of
  /// size()) and returns this rank's part of the sum: rows
  /// [rank * n / size, (rank + 1) * n / size) of dim 0.
  virtual at::Tensor reduceScatterSum(const at::Tensor &input) = 0;
  /// Splits dim 0 of `input` (same shape everywhere, dim 0 a multiple of
  /// size()) into size() equal parts and sends part j to rank j; returns a
  /// tensor of the same shape whose part i came from rank i. Its own inverse
  /// (Ulysses sequence parallelism uses it both ways).
  virtual at::Tensor allToAll(const at::Tensor &input) = 0;
  virtual void send(const at::Tensor &tensor, int dst) = 0;
  virtual void recv(at::Tensor &tensor, int src) = 0;

  /// Posts every send and receive at once and waits for all of them (with
  /// the timeout): the order of a batch cannot deadlock.
  struct Peer {
    at::Tensor tensor;
    int rank;
  };
  virtual void exchange(const std::vector<Peer> &sends,
                        std::vector<Peer> &recvs) = 0;

  /// An exchange in flight: wait() completes it (the receives land in their
  /// tensors) and throws as exchange does.
  class Pending {
  public:
    virtual ~Pending() = default;
    virtual void wait() = 0;
  };
  /// Posts an exchange and returns, so that computation can go on while the
  /// messages move (ring attention's next block). The send tensors must stay
  /// unchanged and the receive tensors unread until wait(), and only one
  /// exchange may be in flight per communicator. This default completes the
  /// exchange before returning; Gloo's and NCCL's overlap.
  virtual std::unique_ptr<Pending> startExchange(const std::vector<Peer> &sends,
                                                 std::vector<Peer> &recvs) {
    struct Done : Pending {
      void wait() override {}
    };
    exchange(sends, recvs);
    return std::make_unique<Done>();
  }
  virtual void barrier() = 0;

  /// Whether collectives may be captured into a CUDA graph and replayed:
  /// NCCL's are kernels on the stream; Gloo's run on the host.
  virtual bool capturable() const { return false; }
  /// Has the timeout watch cover what the current stream has queued so far
  /// (collectives replayed from a CUDA graph, which it did not see issued).
  /// Nothing to do where every call waits for itself.
  virtual void watchQueued(const std::string &what) { (void)what; }

  /// Whether rank `peer` computes on this rank's GPU and each can map the
  /// other's device memory (CUDA IPC, ipc::deviceIdentity), as the world
  /// found when it was created (a probe each rank exports and its peers
  /// map). False across devices, on the CPU, where IPC failed, and under
  /// NCCL, where each rank owns its GPU.
  virtual bool sharesDevice(int peer) {
    (void)peer;
    return false;
  }

  /// A communicator over `ranks` (indices into this one, ascending). Every
  /// member calls it with the same list; others get null. Collective over
  /// this communicator's ranks only in the sense that members must agree.
  virtual std::unique_ptr<Communicator>
  subgroup(const std::vector<int> &ranks) = 0;
};

/// Why dim 0 of `t` does not split into `parts` equal parts, as
/// reduceScatterSum and allToAll need; empty when it does. Every backend checks
/// this before posting, so a bad tensor fails on every rank instead of hanging.
inline std::string unevenRows(const at::Tensor &t, int64_t parts) {
  if (t.dim() > 0 && t.size(0) % parts == 0)
    return "";
  return "dim 0 of a " + std::to_string(t.dim()) + "-d tensor" +
         (t.dim() ? " of " + std::to_string(t.size(0)) + " rows" : "") +
         " does not split into " + std::to_string(parts) + " equal parts";
}

/// Connects to the TCPStore at cfg.masterAddr:cfg.masterPort (rank 0 hosts
/// it) and builds a Gloo process group over loopback or the host's address.
std::unique_ptr<Communicator>
createGlooCommunicator(const RendezvousConfig &cfg);

/// The NCCL backend, for ranks that each own a GPU (cuda:LOCAL_RANK mod the
/// visible devices). Rendezvous goes through the same TCPStore (rank 0
/// publishes the NCCL id). Host tensors go through a device copy. Throws
/// rlhf::Error when no device is visible, or when this runtime was built
/// without NCCL.
std::unique_ptr<Communicator>
createNcclCommunicator(const RendezvousConfig &cfg);

/// Runs `body` as one rank of a job started by rlhf-run: joins the rendezvous
/// the environment describes over Gloo and returns body's exit code. An
/// exception becomes "rank R: error: ..." on stderr and exit code 1, so the
/// launcher can name the failing rank.
int runGlooWorker(const std::function<int(Communicator &world)> &body);

} // namespace rlhf

#endif // RLHF_RUNTIME_COMMUNICATOR_H
