//===- GlooCommunicator.cpp - c10d Gloo backend ---------------------------===//

#include "CudaIpc.h"
#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Store.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <ATen/ATen.h>
#include <c10/util/Logging.h>

#include <algorithm>
#include <cstdio>

using namespace rlhf;

namespace {

/// Gloo moves host memory. A device tensor goes through a host copy, so
/// several ranks can share one GPU (tests of multi-rank layouts on one GPU);
/// NCCL is the backend that moves device memory directly.
at::Tensor onHost(const at::Tensor &t) {
  return t.is_cpu() ? t.contiguous() : t.to(at::kCPU).contiguous();
}
/// Copies a staged result back into `t` (a no-op when `host` is `t`).
void fromHost(at::Tensor &t, const at::Tensor &host) {
  if (!host.is_same(t))
    t.copy_(host);
}

class GlooCommunicator final : public Communicator {
public:
  /// A subgroup: `rank`/`size` within it, sharing the parent's store.
  GlooCommunicator(const RendezvousConfig &cfg,
                   c10::intrusive_ptr<c10d::Store> store,
                   const std::string &prefix, int rank, int size,
                   int globalRank, std::vector<int> members,
                   std::shared_ptr<const std::vector<bool>> sharing)
      : cfg(cfg), store(store), globalRank(globalRank),
        members(std::move(members)), sharing(std::move(sharing)) {
    this->cfg.rank = rank;
    this->cfg.worldSize = size;
    try {
      auto pgOpts = c10d::ProcessGroupGloo::Options::create(cfg.timeout);
      pgOpts->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(deviceHost()));
      pg = c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>(prefix, store), rank, size,
          pgOpts);
    } catch (const std::exception &e) {
      throw Error(where("subgroup " + prefix) + firstLine(e.what()));
    }
  }

  GlooCommunicator(const RendezvousConfig &cfg,
                   c10::intrusive_ptr<c10d::TCPStore> opened,
                   c10::Device device)
      : cfg(cfg), store(std::move(opened)), globalRank(cfg.rank) {
    for (int r = 0; r < cfg.worldSize; ++r)
      members.push_back(r);
    // c10d logs a failed connection with a 30-frame backtrace before it
    // throws; the error below says what matters, once.
    struct QuietC10 {
      int before = FLAGS_caffe2_log_level;
      QuietC10() { FLAGS_caffe2_log_level = 3; }
      ~QuietC10() { FLAGS_caffe2_log_level = before; }
    } quiet;
    try {
      if (!store)
        store = openStore(cfg);
      auto pgOpts = c10d::ProcessGroupGloo::Options::create(cfg.timeout);
      pgOpts->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(deviceHost()));
      pg = c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>("rlhf/world", store), cfg.rank,
          cfg.worldSize, pgOpts);
    } catch (const std::exception &e) {
      std::string at =
          cfg.masterPort ? cfg.masterAddr + ":" + std::to_string(cfg.masterPort)
                         : cfg.masterAddr + " (port from " + cfg.portFile + ")";
      std::string why = firstLine(e.what());
      if (!why.empty() && why.back() == '.')
        why.pop_back(); // a hint follows
      throw Error(where("rendezvous at " + at) + why +
                  (cfg.rank == 0
                       ? "; is another job using the port?"
                       : "; check that rank 0 runs and that MASTER_ADDR and "
                         "MASTER_PORT reach it, or raise "
                         "RLHF_COMM_TIMEOUT_MS, which also bounds the "
                         "rendezvous"));
    }
    findSharing(device);
  }

  int rank() const override { return cfg.rank; }
  int size() const override { return cfg.worldSize; }
  const char *backendName() const override { return "gloo"; }

  void allReduceSum(at::Tensor &t) override {
    std::vector<at::Tensor> ts{onHost(t)};
    run("all_reduce", [&] { return pg->allreduce(ts); });
    fromHost(t, ts[0]);
  }

  void broadcast(at::Tensor &t, int root) override {
    std::vector<at::Tensor> ts{onHost(t)};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    run("broadcast", [&] { return pg->broadcast(ts, o); });
    fromHost(t, ts[0]);
  }

  void barrier() override {
    run("barrier", [&] { return pg->barrier(); });
  }

  at::Tensor allGather(const at::Tensor &input) override {
    std::vector<at::Tensor> in{onHost(input)};
    std::vector<std::vector<at::Tensor>> out(1);
    for (int r = 0; r < cfg.worldSize; ++r)
      out[0].push_back(at::empty_like(in[0]));
    run("all_gather", [&] { return pg->allgather(out, in); });
    return at::cat(out[0], 0).to(input.device());
  }

  at::Tensor reduceScatterSum(const at::Tensor &input) override {
    if (std::string why = unevenRows(input, cfg.worldSize); !why.empty())
      throw Error(where("reduce_scatter") + why);
    at::Tensor in = onHost(input);
    std::vector<int64_t> shape = in.sizes().vec();
    shape[0] /= cfg.worldSize;
    at::Tensor out = at::empty(shape, in.options());
    run("reduce_scatter", [&] { return pg->_reduce_scatter_base(out, in); });
    return out.to(input.device());
  }

  at::Tensor allToAll(const at::Tensor &input) override {
    if (std::string why = unevenRows(input, cfg.worldSize); !why.empty())
      throw Error(where("all_to_all") + why);
    at::Tensor in = onHost(input);
    at::Tensor out = at::empty_like(in);
    std::vector<int64_t> equal; // empty counts: equal parts of dim 0
    run("all_to_all", [&] { return pg->alltoall_base(out, in, equal, equal); });
    return out.to(input.device());
  }

  void send(const at::Tensor &t, int dst) override {
    std::vector<at::Tensor> ts{onHost(t)};
    run("send", [&] { return pg->send(ts, dst, /*tag=*/0); });
  }

  void recv(at::Tensor &t, int src) override {
    std::vector<at::Tensor> ts{onHost(t)};
    run("recv", [&] { return pg->recv(ts, src, /*tag=*/0); });
    fromHost(t, ts[0]);
  }

  void exchange(const std::vector<Peer> &sends,
                std::vector<Peer> &recvs) override {
    startExchange(sends, recvs)->wait();
  }

  /// Gloo's sends and receives run on its own threads: posting them and
  /// waiting later overlaps them with whatever the caller computes.
  std::unique_ptr<Pending> startExchange(const std::vector<Peer> &sends,
                                         std::vector<Peer> &recvs) override {
    struct Posted : Pending {
      const GlooCommunicator *self;
      std::vector<std::vector<at::Tensor>> bufs; ///< host copies, in order
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      std::vector<at::Tensor> targets; ///< the receives' own tensors
      void wait() override {
        try {
          for (auto &w : works)
            if (!w->wait(self->cfg.timeout))
              throw Error("timed out");
          const size_t firstRecv = bufs.size() - targets.size();
          for (size_t i = 0; i < targets.size(); ++i)
            fromHost(targets[i], bufs[firstRecv + i][0]);
        } catch (const std::exception &e) {
          throw self->exchangeError(e);
        }
      }
    };
    auto p = std::make_unique<Posted>();
    p->self = this;
    p->bufs.reserve(sends.size() + recvs.size());
    try {
      for (const Peer &s : sends) {
        p->bufs.push_back({onHost(s.tensor)});
        p->works.push_back(pg->send(p->bufs.back(), s.rank, /*tag=*/1));
      }
      for (Peer &r : recvs) {
        p->bufs.push_back({onHost(r.tensor)});
        p->works.push_back(pg->recv(p->bufs.back(), r.rank, /*tag=*/1));
        p->targets.push_back(r.tensor);
      }
    } catch (const std::exception &e) {
      throw exchangeError(e);
    }
    return p;
  }

  std::unique_ptr<Communicator>
  subgroup(const std::vector<int> &ranks) override {
    // Every call needs a fresh store prefix; members agree on it because
    // they create their subgroups in the same order.
    std::string prefix = "rlhf/sub" + std::to_string(subgroupCount++);
    for (int r : ranks)
      prefix += "." + std::to_string(r);
    auto it = std::find(ranks.begin(), ranks.end(), cfg.rank);
    if (it == ranks.end())
      return nullptr;
    std::vector<int> global;
    for (int r : ranks)
      global.push_back(members.at(size_t(r)));
    return std::make_unique<GlooCommunicator>(
        cfg, store, prefix, int(it - ranks.begin()), int(ranks.size()),
        globalRank, std::move(global), sharing);
  }

  bool sharesDevice(int peer) override {
    if (peer < 0 || peer >= cfg.worldSize || peer == cfg.rank || !sharing)
      return false;
    return (*sharing)[size_t(members.at(size_t(peer)))];
  }

private:
  /// The ranks on this rank's GPU whose memory it maps (CUDA IPC), decided
  /// once for the world: each exports a small probe, maps its peers', and
  /// shares with a peer only where both could (ranksSharingMemory). A
  /// sandbox or container may refuse CUDA IPC, and PyTorch's expandable
  /// segments share otherwise; tensors between such ranks then go through
  /// host memory, as with RLHF_CUDA_IPC=0.
  void findSharing(c10::Device device) {
    const std::string identity = device.is_cuda() ? ipc::deviceIdentity() : "";
    std::vector<uint8_t> offer;
    std::string offerError, failure;
    if (!identity.empty()) {
      offer.resize(size_t(ipc::kRecordBytes));
      try {
        ipc::exportProbe(cfg.rank, offer.data());
      } catch (const std::exception &e) {
        offerError = firstLine(e.what());
      }
    }
    try {
      sharing = std::make_shared<const std::vector<bool>>(ranksSharingMemory(
          *store, cfg, identity, offer, offerError,
          [](int peer, const std::vector<uint8_t> &rec) {
            return rec.size() == size_t(ipc::kRecordBytes)
                       ? firstLine(ipc::checkProbe(rec.data(), peer))
                       : "a malformed probe record";
          },
          &failure));
    } catch (const std::exception &e) {
      throw Error(where("device sharing") + firstLine(e.what()));
    }
    if (!failure.empty())
      std::fprintf(stderr,
                   "rank %d: note: CUDA IPC between ranks on this GPU failed "
                   "(%s); tensors between them go through host memory "
                   "(RLHF_CUDA_IPC=0 skips the attempt)\n",
                   cfg.rank, failure.c_str());
  }

  // Loopback workers bind to loopback; others bind to the address they use
  // to reach the master, which Gloo resolves from the hostname.
  std::string deviceHost() const {
    const std::string &a = cfg.masterAddr;
    if (a == "localhost")
      return "127.0.0.1";
    if (a.rfind("127.", 0) == 0)
      return a;
    char buf[256];
    if (gethostname(buf, sizeof(buf)) == 0)
      return buf;
    return a;
  }

  Error exchangeError(const std::exception &e) const {
    return Error(where("exchange") + firstLine(e.what()) + " (timeout " +
                 std::to_string(cfg.timeout.count()) +
                 " ms); a peer rank is likely dead or stuck");
  }

  std::string where(const std::string &op) const {
    std::string who = "rank " + std::to_string(globalRank);
    if (cfg.rank != globalRank)
      who += " (" + std::to_string(cfg.rank) + "/" +
             std::to_string(cfg.worldSize) + " in its group)";
    else
      who = "rank " + std::to_string(cfg.rank) + "/" +
            std::to_string(cfg.worldSize);
    return who + ": " + op + " failed: ";
  }

  template <typename F> void run(const char *op, F &&issue) {
    try {
      auto work = issue();
      if (!work->wait(cfg.timeout))
        throw Error("timed out");
    } catch (const Error &e) {
      throw Error(where(op) + e.what() + " after " +
                  std::to_string(cfg.timeout.count()) +
                  " ms; a peer rank is likely dead or stuck");
    } catch (const std::exception &e) {
      throw Error(where(op) + firstLine(e.what()) + " (timeout " +
                  std::to_string(cfg.timeout.count()) +
                  " ms); a peer rank is likely dead or stuck");
    }
  }

  RendezvousConfig cfg;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  int globalRank = 0;
  std::vector<int> members; ///< the global rank of each member
  int subgroupCount = 0;
  /// By global rank: whether this rank maps that one's memory (findSharing).
  std::shared_ptr<const std::vector<bool>> sharing;
};

} // namespace

std::unique_ptr<Communicator>
rlhf::createGlooCommunicator(const RendezvousConfig &cfg,
                             c10::intrusive_ptr<c10d::TCPStore> store,
                             c10::Device device) {
  // Every worker joins its job here, so the thread policy lives here too.
  setHostThreads(cfg);
  return std::make_unique<GlooCommunicator>(cfg, std::move(store), device);
}

std::unique_ptr<Communicator>
rlhf::createGlooCommunicator(const RendezvousConfig &cfg) {
  return createGlooCommunicator(cfg, nullptr);
}
