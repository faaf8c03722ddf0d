//===- NcclCommunicator.cpp - the NCCL backend ----------------------------===//
//
// The Communicator interface over NCCL, for ranks that each own a GPU.
// Collectives run on the current CUDA stream of this rank's device, so they
// are ordered after the kernels that produced their inputs and before those
// that use their outputs; point-to-point exchanges run on a side stream that
// waits for the current one, so that compute can overlap them. CUDA tensors
// are used in place; host tensors (counters, norms) go through a device
// copy. Communicators are non-blocking (NCCL's config.blocking = 0), so
// that set-up, splits and the connections a first operation makes return at
// once; the host then polls them, and the stream, against the timeout and,
// when a peer dies, aborts the communicator and throws an rlhf::Error naming
// the rank: never a hang.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Store.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>

#include <chrono>
#include <cstring>
#include <cuda_runtime.h>
#include <nccl.h>
#include <thread>

using namespace rlhf;

namespace {

ncclDataType_t ncclType(const at::Tensor &t) {
  switch (t.scalar_type()) {
  case at::kFloat:
    return ncclFloat32;
  case at::kDouble:
    return ncclFloat64;
  case at::kHalf:
    return ncclFloat16;
  case at::kBFloat16:
    return ncclBfloat16;
  case at::kInt:
    return ncclInt32;
  case at::kLong:
    return ncclInt64;
  case at::kByte:
    return ncclUint8;
  case at::kChar:
    return ncclInt8;
  case at::kBool:
    return ncclUint8;
  default:
    throw Error("NCCL cannot move tensors of type " +
                std::string(at::toString(t.scalar_type())));
  }
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(const RendezvousConfig &cfg, ncclComm_t comm, int rank,
                   int size, int globalRank, c10::Device device)
      : cfg(cfg), comm(comm), globalRank(globalRank), device(device) {
    this->cfg.rank = rank;
    this->cfg.worldSize = size;
  }

  static std::unique_ptr<Communicator>
  create(const RendezvousConfig &cfg,
         c10::intrusive_ptr<c10d::TCPStore> store) {
    setHostThreads(cfg);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      throw Error(
          "rank " + std::to_string(cfg.rank) +
          ": the NCCL backend needs a CUDA device, and none is visible");
    c10::Device device(c10::kCUDA, c10::DeviceIndex(cfg.localRank % devices));
    if (cudaSetDevice(device.index()) != cudaSuccess)
      throw Error("rank " + std::to_string(cfg.rank) +
                  ": cannot select CUDA device " +
                  std::to_string(device.index()));
    if (!store)
      store = openStore(cfg);
    ncclUniqueId id;
    if (cfg.rank == 0) {
      if (ncclGetUniqueId(&id) != ncclSuccess)
        throw Error("rank 0: ncclGetUniqueId failed");
      store->set(
          "rlhf/nccl-id",
          std::vector<uint8_t>(reinterpret_cast<uint8_t *>(&id),
                               reinterpret_cast<uint8_t *>(&id) + sizeof(id)));
    }
    std::vector<uint8_t> bytes =
        store->get("rlhf/nccl-id"); // waits, with timeout
    std::memcpy(&id, bytes.data(), sizeof(id));
    ncclComm_t comm = nullptr;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r =
        ncclCommInitRankConfig(&comm, cfg.worldSize, id, cfg.rank, &config);
    auto c = std::make_unique<NcclCommunicator>(
        cfg, comm, cfg.rank, cfg.worldSize, cfg.rank, device);
    c->settle("ncclCommInitRank", r, c->comm);
    c->store = std::move(store);
    return c;
  }

  ~NcclCommunicator() override {
    if (comm)
      ncclCommDestroy(comm);
  }

  int rank() const override { return cfg.rank; }
  int size() const override { return cfg.worldSize; }
  const char *backendName() const override { return "nccl"; }

  void allReduceSum(at::Tensor &t) override {
    at::Tensor d = onDevice(t);
    run("all_reduce", [&](cudaStream_t s) {
      return ncclAllReduce(d.data_ptr(), d.data_ptr(), d.numel(), ncclType(d),
                           ncclSum, comm, s);
    });
    back(t, d);
  }

  void broadcast(at::Tensor &t, int root) override {
    at::Tensor d = onDevice(t);
    run("broadcast", [&](cudaStream_t s) {
      return ncclBroadcast(d.data_ptr(), d.data_ptr(), d.numel(), ncclType(d),
                           root, comm, s);
    });
    back(t, d);
  }

  at::Tensor allGather(const at::Tensor &input) override {
    at::Tensor in = onDevice(input);
    std::vector<int64_t> shape = in.sizes().vec();
    if (shape.empty())
      shape.push_back(1);
    shape[0] *= cfg.worldSize;
    at::Tensor out = at::empty(shape, in.options());
    run("all_gather", [&](cudaStream_t s) {
      return ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(),
                           ncclType(in), comm, s);
    });
    return out.to(input.device());
  }

  at::Tensor reduceScatterSum(const at::Tensor &input) override {
    if (std::string why = unevenRows(input, cfg.worldSize); !why.empty())
      throw Error(where("reduce_scatter") + why);
    at::Tensor in = onDevice(input);
    std::vector<int64_t> shape = in.sizes().vec();
    shape[0] /= cfg.worldSize;
    at::Tensor out = at::empty(shape, in.options());
    run("reduce_scatter", [&](cudaStream_t s) {
      return ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(),
                               ncclType(in), ncclSum, comm, s);
    });
    return out.to(input.device());
  }

  at::Tensor allToAll(const at::Tensor &input) override {
    if (std::string why = unevenRows(input, cfg.worldSize); !why.empty())
      throw Error(where("all_to_all") + why);
    at::Tensor in = onDevice(input);
    at::Tensor out = at::empty_like(in);
    const int k = cfg.worldSize;
    const int64_t n = in.numel() / k;
    const size_t bytes = size_t(n) * in.element_size();
    // NCCL has no all-to-all primitive: one send and one receive per peer in
    // a group, as c10d's ProcessGroupNCCL::alltoall_base does.
    run("all_to_all", [&](cudaStream_t s) {
      ncclGroupStart();
      for (int r = 0; r < k; ++r) {
        ncclSend(static_cast<char *>(in.data_ptr()) + r * bytes, n,
                 ncclType(in), r, comm, s);
        ncclRecv(static_cast<char *>(out.data_ptr()) + r * bytes, n,
                 ncclType(in), r, comm, s);
      }
      return ncclGroupEnd();
    });
    return out.to(input.device());
  }

  void send(const at::Tensor &t, int dst) override {
    std::vector<Peer> sends{{t, dst}}, recvs;
    exchange(sends, recvs);
  }

  void recv(at::Tensor &t, int src) override {
    std::vector<Peer> sends, recvs{{t, src}};
    exchange(sends, recvs);
  }

  void exchange(const std::vector<Peer> &sends,
                std::vector<Peer> &recvs) override {
    startExchange(sends, recvs)->wait();
  }

  /// The exchange runs on a side stream that first waits for the current
  /// one (so it sees the inputs' producers); kernels queued on the current
  /// stream meanwhile overlap it. wait() polls the side stream like `run`.
  std::unique_ptr<Pending> startExchange(const std::vector<Peer> &sends,
                                         std::vector<Peer> &recvs) override {
    struct Posted : Pending {
      NcclCommunicator *self;
      c10::cuda::CUDAStream side;
      std::vector<at::Tensor> sd, rd; ///< held until the side stream is done
      std::vector<at::Tensor> targets;
      explicit Posted(NcclCommunicator *self, c10::cuda::CUDAStream side)
          : self(self), side(side) {}
      void wait() override {
        // Done on the host, so whatever is queued next comes after it.
        self->poll("exchange", side.stream());
        for (size_t i = 0; i < rd.size(); ++i)
          back(targets[i], rd[i]);
      }
    };
    if (!comm)
      throw Error(where("exchange") + "the communicator was aborted earlier");
    c10::cuda::CUDAStream current =
        c10::cuda::getCurrentCUDAStream(device.index());
    auto p = std::make_unique<Posted>(
        this,
        c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device.index()));
    for (const Peer &x : sends)
      p->sd.push_back(onDevice(x.tensor));
    for (Peer &x : recvs) {
      p->rd.push_back(onDevice(x.tensor));
      p->targets.push_back(x.tensor);
    }
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(p->side);
    // The caching allocator must not hand these blocks out again before
    // the side stream is through with them.
    for (const std::vector<at::Tensor> *ts : {&p->sd, &p->rd})
      for (const at::Tensor &t : *ts)
        c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(),
                                                      p->side);
    cudaStream_t s = p->side.stream();
    ncclGroupStart();
    for (size_t i = 0; i < p->sd.size(); ++i)
      ncclSend(p->sd[i].data_ptr(), p->sd[i].numel(), ncclType(p->sd[i]),
               sends[i].rank, comm, s);
    for (size_t i = 0; i < p->rd.size(); ++i)
      ncclRecv(p->rd[i].data_ptr(), p->rd[i].numel(), ncclType(p->rd[i]),
               recvs[i].rank, comm, s);
    settle("exchange", ncclGroupEnd(), comm);
    return p;
  }

  void barrier() override {
    at::Tensor one = at::ones({1}, at::TensorOptions().device(device));
    allReduceSum(one);
  }

  std::unique_ptr<Communicator>
  subgroup(const std::vector<int> &ranks) override {
    // ncclCommSplit is collective over this communicator: every rank calls
    // subgroup for every group (makeGroups does), non-members without a color.
    auto it = std::find(ranks.begin(), ranks.end(), cfg.rank);
    int color = it == ranks.end() ? NCCL_SPLIT_NOCOLOR : ranks.front();
    if (!comm)
      throw Error(where("subgroup") + "the communicator was aborted earlier");
    ncclComm_t sub = nullptr;
    // The child inherits the parent's (non-blocking) configuration.
    ncclResult_t r = ncclCommSplit(comm, color, cfg.rank, &sub, nullptr);
    settle("ncclCommSplit", r, comm);
    if (it == ranks.end())
      return nullptr;
    if (!sub)
      throw Error(where("subgroup") +
                  "ncclCommSplit gave this member no "
                  "communicator: " +
                  ncclGetLastError(comm));
    auto c = std::make_unique<NcclCommunicator>(
        cfg, sub, int(it - ranks.begin()), int(ranks.size()), globalRank,
        device);
    c->settle("ncclCommSplit", ncclInProgress, c->comm);
    return c;
  }

private:
  std::string where(const std::string &op) const {
    return "rank " + std::to_string(globalRank) + ": " + op + " failed: ";
  }

  /// `t` as contiguous memory on this rank's device: `t` itself when it is
  /// a contiguous tensor there, else a copy.
  at::Tensor onDevice(const at::Tensor &t) const {
    return t.to(device).contiguous();
  }
  /// Copies an op's result back into `t` when it worked on a copy.
  static void back(at::Tensor &t, const at::Tensor &d) {
    if (!d.is_same(t))
      t.copy_(d);
  }

  /// Issues an op on the current stream, then polls it.
  template <typename F> void run(const std::string &op, F &&issue) {
    if (!comm)
      throw Error(where(op) + "the communicator was aborted earlier");
    cudaStream_t s = c10::cuda::getCurrentCUDAStream(device.index()).stream();
    settle(op, issue(s), comm);
    poll(op, s);
  }

  /// Waits, with the timeout, until `c` (this communicator or the one being
  /// made) has carried out a call that returned `r`: a non-blocking one may
  /// still be in progress. A failure or a timeout aborts `c` and throws.
  void settle(const std::string &op, ncclResult_t r, ncclComm_t &c) {
    auto deadline = std::chrono::steady_clock::now() + cfg.timeout;
    while (r == ncclInProgress && c) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      if (ncclCommGetAsyncError(c, &r) != ncclSuccess)
        r = ncclInternalError;
      if (r == ncclInProgress && std::chrono::steady_clock::now() > deadline)
        r = ncclNumResults; // timed out
    }
    if (r == ncclSuccess)
      return;
    std::string why = r == ncclNumResults
                          ? "timed out after " +
                                std::to_string(cfg.timeout.count()) +
                                " ms; a peer rank is likely dead or stuck"
                          : ncclGetErrorString(r);
    if (r == ncclRemoteError || r == ncclSystemError)
      why += "; a peer rank is likely dead";
    if (c) {
      ncclCommAbort(c);
      c = nullptr;
    }
    throw Error(where(op) + why);
  }

  /// Waits for stream `s` with the timeout: a dead peer leaves NCCL
  /// spinning, so abort the communicator and report instead of hanging.
  void poll(const std::string &op, cudaStream_t s) {
    auto deadline = std::chrono::steady_clock::now() + cfg.timeout;
    for (;;) {
      cudaError_t e = cudaStreamQuery(s);
      if (e == cudaSuccess)
        return;
      if (e != cudaErrorNotReady)
        throw Error(where(op) + cudaGetErrorString(e));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async == ncclInProgress)
        async = ncclSuccess;
      if (async != ncclSuccess || std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm);
        comm = nullptr;
        throw Error(
            where(op) +
            (async != ncclSuccess ? ncclGetErrorString(async) : "timed out") +
            " (timeout " + std::to_string(cfg.timeout.count()) +
            " ms); a peer rank is likely dead or stuck");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  RendezvousConfig cfg;
  c10::intrusive_ptr<c10d::Store> store; ///< the world's; subgroups need none
  ncclComm_t comm = nullptr;
  int globalRank = 0;
  c10::Device device;
};

} // namespace

std::unique_ptr<Communicator>
rlhf::createNcclCommunicator(const RendezvousConfig &cfg,
                             c10::intrusive_ptr<c10d::TCPStore> store) {
  return NcclCommunicator::create(cfg, std::move(store));
}

std::unique_ptr<Communicator>
rlhf::createNcclCommunicator(const RendezvousConfig &cfg) {
  return NcclCommunicator::create(cfg, nullptr);
}
