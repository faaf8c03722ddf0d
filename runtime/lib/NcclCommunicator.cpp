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
// once; the host polls them against the timeout. The host does not wait for
// a collective to end: CommWatchdog does, and when one fails or times out it
// aborts every communicator of the process (so kernels stuck behind a dead
// peer, and any host sync behind them, return) and the next call throws an
// rlhf::Error naming the rank: never a hang. barrier() waits on the host.
//
//===----------------------------------------------------------------------===//

#include "CommWatchdog.h"
#include "CudaWatch.h"

#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Store.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cuda_runtime.h>
#include <mutex>
#include <nccl.h>
#include <thread>
#include <vector>

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

/// One NCCL communicator, shared by its Communicator and the watchdog's
/// polls of its operations: the last holder destroys it. An abort, from any
/// thread, goes through `mu` so that no call is using it meanwhile.
struct CommHandle {
  std::mutex mu;
  ncclComm_t comm = nullptr;
  bool aborted = false;
  ~CommHandle() {
    if (comm && !aborted)
      ncclCommDestroy(comm);
  }
  /// With `mu` held.
  void abortLocked() {
    if (comm && !aborted) {
      noteCommunicatorAborted();
      ncclCommAbort(comm);
    }
    aborted = true;
  }
};

/// Every live communicator of the process: a dead peer leaves its partners
/// stuck in every group they share with it, so a failure aborts them all.
std::mutex registryMu;
std::vector<std::weak_ptr<CommHandle>> registry;

std::shared_ptr<CommHandle> registered(ncclComm_t comm) {
  auto h = std::make_shared<CommHandle>();
  h->comm = comm;
  std::lock_guard<std::mutex> lock(registryMu);
  registry.erase(std::remove_if(registry.begin(), registry.end(),
                                [](const auto &w) { return w.expired(); }),
                 registry.end());
  registry.push_back(h);
  return h;
}

void abortAll() {
  std::vector<std::shared_ptr<CommHandle>> live;
  {
    std::lock_guard<std::mutex> lock(registryMu);
    for (const auto &w : registry)
      if (auto h = w.lock())
        live.push_back(std::move(h));
  }
  for (const auto &h : live) {
    std::lock_guard<std::mutex> lock(h->mu);
    h->abortLocked();
  }
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(const RendezvousConfig &cfg, std::shared_ptr<CommHandle> h,
                   int rank, int size, int globalRank, c10::Device device)
      : cfg(cfg), h(std::move(h)), globalRank(globalRank), device(device) {
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
    CommWatchdog::process().setStallLimit(cfg.watchdogStall);
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
        cfg, registered(comm), cfg.rank, cfg.worldSize, cfg.rank, device);
    {
      std::lock_guard<std::mutex> lock(c->h->mu);
      c->settle("ncclCommInitRank", r, *c->h);
    }
    c->store = std::move(store);
    return c;
  }

  /// Waits until nothing of this process is in flight: NCCL must not free
  /// what queued kernels still use (the watchdog's polls hold the handle).
  ~NcclCommunicator() override {
    try {
      CommWatchdog::process().drain();
    } catch (const std::exception &) {
      // The failure reaches the caller at its next check.
    }
  }

  int rank() const override { return cfg.rank; }
  int size() const override { return cfg.worldSize; }
  const char *backendName() const override { return "nccl"; }

  void allReduceSum(at::Tensor &t) override {
    at::Tensor d = onDevice(t);
    run("all_reduce", [&](ncclComm_t comm, cudaStream_t s) {
      return ncclAllReduce(d.data_ptr(), d.data_ptr(), d.numel(), ncclType(d),
                           ncclSum, comm, s);
    });
    back(t, d);
  }

  void broadcast(at::Tensor &t, int root) override {
    at::Tensor d = onDevice(t);
    run("broadcast", [&](ncclComm_t comm, cudaStream_t s) {
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
    run("all_gather", [&](ncclComm_t comm, cudaStream_t s) {
      return ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(),
                           ncclType(in), comm, s);
    });
    return to(out, input.device());
  }

  at::Tensor reduceScatterSum(const at::Tensor &input) override {
    if (std::string why = unevenRows(input, cfg.worldSize); !why.empty())
      throw Error(where("reduce_scatter") + why);
    at::Tensor in = onDevice(input);
    std::vector<int64_t> shape = in.sizes().vec();
    shape[0] /= cfg.worldSize;
    at::Tensor out = at::empty(shape, in.options());
    run("reduce_scatter", [&](ncclComm_t comm, cudaStream_t s) {
      return ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(),
                               ncclType(in), ncclSum, comm, s);
    });
    return to(out, input.device());
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
    run("all_to_all", [&](ncclComm_t comm, cudaStream_t s) {
      ncclGroupStart();
      for (int r = 0; r < k; ++r) {
        ncclSend(static_cast<char *>(in.data_ptr()) + r * bytes, n,
                 ncclType(in), r, comm, s);
        ncclRecv(static_cast<char *>(out.data_ptr()) + r * bytes, n,
                 ncclType(in), r, comm, s);
      }
      return ncclGroupEnd();
    });
    return to(out, input.device());
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
  /// stream meanwhile overlap it; the watchdog watches it from the start.
  /// wait() makes the current stream wait for the side one.
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
        at::cuda::CUDAEvent done;
        done.record(side);
        done.block(c10::cuda::getCurrentCUDAStream(self->device.index()));
        for (size_t i = 0; i < rd.size(); ++i)
          back(targets[i], rd[i]);
      }
    };
    CommWatchdog::process().check();
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
    {
      std::lock_guard<std::mutex> lock(h->mu);
      if (h->aborted)
        throw Error(where("exchange") + "the communicator was aborted earlier");
      ncclGroupStart();
      for (size_t i = 0; i < p->sd.size(); ++i)
        ncclSend(p->sd[i].data_ptr(), p->sd[i].numel(), ncclType(p->sd[i]),
                 sends[i].rank, h->comm, s);
      for (size_t i = 0; i < p->rd.size(); ++i)
        ncclRecv(p->rd[i].data_ptr(), p->rd[i].numel(), ncclType(p->rd[i]),
                 recvs[i].rank, h->comm, s);
      settle("exchange", ncclGroupEnd(), *h);
    }
    watchUnlessCapturing("exchange", p->side);
    return p;
  }

  bool capturable() const override { return true; }

  void watchQueued(const std::string &what) override {
    CommWatchdog::process().check();
    watch(what, c10::cuda::getCurrentCUDAStream(device.index()));
  }

  /// Waits on the host: every rank has reached it once this returns.
  void barrier() override {
    at::Tensor one = at::ones({1}, at::TensorOptions().device(device));
    allReduceSum(one);
    waitHost("barrier");
  }

  std::unique_ptr<Communicator>
  subgroup(const std::vector<int> &ranks) override {
    // ncclCommSplit is collective over this communicator: every rank calls
    // subgroup for every group (makeGroups does), non-members without a color.
    auto it = std::find(ranks.begin(), ranks.end(), cfg.rank);
    int color = it == ranks.end() ? NCCL_SPLIT_NOCOLOR : ranks.front();
    CommWatchdog::process().check();
    ncclComm_t sub = nullptr;
    {
      std::lock_guard<std::mutex> lock(h->mu);
      if (h->aborted)
        throw Error(where("subgroup") + "the communicator was aborted earlier");
      // The child inherits the parent's (non-blocking) configuration. NCCL
      // ranks a child's members by key: their index in `ranks`, the rank
      // this communicator reports, whatever the order of `ranks`.
      const int key = it == ranks.end() ? cfg.rank : int(it - ranks.begin());
      ncclResult_t r = ncclCommSplit(h->comm, color, key, &sub, nullptr);
      settle("ncclCommSplit", r, *h);
      if (it != ranks.end() && !sub)
        throw Error(where("subgroup") +
                    "ncclCommSplit gave this member no communicator: " +
                    ncclGetLastError(h->comm));
    }
    if (it == ranks.end())
      return nullptr;
    auto c = std::make_unique<NcclCommunicator>(
        cfg, registered(sub), int(it - ranks.begin()), int(ranks.size()),
        globalRank, device);
    std::lock_guard<std::mutex> lock(c->h->mu);
    c->settle("ncclCommSplit", ncclInProgress, *c->h);
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
  /// Copies an op's result back into `t` when it worked on a copy. A copy
  /// to the host waits for the op, so a failure it outlived shows here.
  static void back(at::Tensor &t, const at::Tensor &d) {
    if (d.is_same(t))
      return;
    t.copy_(d);
    if (!t.is_cuda())
      CommWatchdog::process().check();
  }
  /// `out` on `to` (the caller's device), checked as back() does.
  static at::Tensor to(const at::Tensor &out, c10::Device to) {
    at::Tensor r = out.to(to);
    if (!to.is_cuda())
      CommWatchdog::process().check();
    return r;
  }

  /// Issues an op on the current stream and hands it to the watchdog: the
  /// stream orders its inputs and outputs, so the host need not wait. An op
  /// being captured into a CUDA graph is not watched (an event recorded in
  /// a capture cannot be queried); whoever replays it calls watchQueued.
  template <typename F> void run(const std::string &op, F &&issue) {
    CommWatchdog::process().check();
    c10::cuda::CUDAStream s = c10::cuda::getCurrentCUDAStream(device.index());
    {
      std::lock_guard<std::mutex> lock(h->mu);
      if (h->aborted)
        throw Error(where(op) + "the communicator was aborted earlier");
      settle(op, issue(h->comm, s.stream()), *h);
    }
    watchUnlessCapturing(op, s);
  }

  /// watch, unless `stream` is being captured: an event recorded in a
  /// capture cannot be queried (whoever replays it calls watchQueued).
  void watchUnlessCapturing(const std::string &op,
                            c10::cuda::CUDAStream stream) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream.stream(), &capture) == cudaSuccess &&
        capture == cudaStreamCaptureStatusNone)
      watch(op, stream);
  }

  /// Has the watchdog watch what `stream` has queued so far.
  void watch(const std::string &op, c10::cuda::CUDAStream stream) {
    auto ev = std::make_shared<at::cuda::CUDAEvent>();
    ev->record(stream);
    std::shared_ptr<CommHandle> handle = h;
    const int index = device.index();
    CommWatchdog::process().track(
        stream.stream(), where(op),
        [ev, handle, index](std::string &why) {
          if (auto s = pollCudaEvent(ev->event(), index, why);
              s != CommWatchdog::State::Pending)
            return s;
          // A call holding the handle is only issuing; ask next time.
          std::unique_lock<std::mutex> lock(handle->mu, std::try_to_lock);
          ncclResult_t r = ncclSuccess;
          if (lock.owns_lock() && handle->comm && !handle->aborted &&
              ncclCommGetAsyncError(handle->comm, &r) == ncclSuccess &&
              r != ncclSuccess && r != ncclInProgress) {
            why = std::string(ncclGetErrorString(r)) +
                  "; a peer rank is likely dead";
            return CommWatchdog::State::Failed;
          }
          return CommWatchdog::State::Pending;
        },
        cfg.timeout, abortAll);
  }

  /// Waits on the host until the current stream is done, or the watchdog
  /// reports a failure (it times the ops out, so this ends).
  void waitHost(const std::string &op) {
    cudaStream_t s = c10::cuda::getCurrentCUDAStream(device.index()).stream();
    // Beyond the ops' own timeout, for work queued ahead of them.
    auto deadline = std::chrono::steady_clock::now() + 2 * cfg.timeout;
    for (;;) {
      cudaError_t e = cudaStreamQuery(s);
      if (e == cudaSuccess)
        return CommWatchdog::process().check();
      if (e != cudaErrorNotReady)
        throw Error(where(op) + cudaGetErrorString(e));
      CommWatchdog::process().check();
      if (std::chrono::steady_clock::now() > deadline) {
        std::string why = where(op) + "timed out (timeout " +
                          std::to_string(cfg.timeout.count()) +
                          " ms); a peer rank is likely dead or stuck";
        {
          CommWatchdog::Section aborting(
              CommWatchdog::process(),
              why + "; then aborting every communicator");
          abortAll();
        }
        throw Error(why);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  /// Waits, with the timeout, until `c` (this communicator or the one being
  /// made; its `mu` held) has carried out a call that returned `r`: a
  /// non-blocking one may still be in progress. A failure or a timeout
  /// aborts `c` and throws.
  void settle(const std::string &op, ncclResult_t r, CommHandle &c) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + cfg.timeout;
    // A non-blocking communicator returns ncclInProgress from nearly every
    // call: NCCL launches each group, every single collective included, on
    // a thread of its own. That ends in tens of microseconds, less than a
    // sleep's timer slack, so spin first: a tp all-reduce per layer would
    // otherwise pay a sleep each.
    const auto spinUntil = start + std::chrono::microseconds(300);
    while (r == ncclInProgress && c.comm) {
      if (std::chrono::steady_clock::now() < spinUntil)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      if (ncclCommGetAsyncError(c.comm, &r) != ncclSuccess)
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
    {
      CommWatchdog::Section aborting(CommWatchdog::process(),
                                     where(op) + why +
                                         "; then aborting its communicator");
      c.abortLocked();
    }
    throw Error(where(op) + why);
  }

  RendezvousConfig cfg;
  c10::intrusive_ptr<c10d::Store> store; ///< the world's; subgroups need none
  std::shared_ptr<CommHandle> h;
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
