//===- NcclCommunicator.cpp - the NCCL backend ----------------------------===//

#include "rlhf/cuda/NcclCommunicator.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Store.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cstring>
#include <cuda_runtime.h>
#include <nccl.h>
#include <thread>

using namespace rlhf;

namespace {

ncclDataType_t ncclType(const at::Tensor &t) {
  switch (t.scalar_type()) {
  case at::kFloat: return ncclFloat32;
  case at::kDouble: return ncclFloat64;
  case at::kHalf: return ncclFloat16;
  case at::kBFloat16: return ncclBfloat16;
  case at::kInt: return ncclInt32;
  case at::kLong: return ncclInt64;
  case at::kByte: return ncclUint8;
  case at::kChar: return ncclInt8;
  default: throw Error("NCCL cannot move tensors of type " +
                       std::string(at::toString(t.scalar_type())));
  }
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(const RendezvousConfig &cfg, c10::intrusive_ptr<c10d::Store> store,
                   ncclComm_t comm, int rank, int size, int globalRank)
      : cfg(cfg), store(std::move(store)), comm(comm), globalRank(globalRank) {
    this->cfg.rank = rank;
    this->cfg.worldSize = size;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  }

  static std::unique_ptr<Communicator> create(const RendezvousConfig &cfg) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      throw Error("rank " + std::to_string(cfg.rank) +
                  ": the NCCL backend needs a CUDA device, and none is visible");
    if (cudaSetDevice(cfg.localRank % devices) != cudaSuccess)
      throw Error("rank " + std::to_string(cfg.rank) + ": cannot select CUDA device");
    auto store = openStore(cfg);
    ncclUniqueId id;
    if (cfg.rank == 0) {
      ncclGetUniqueId(&id);
      store->set("rlhf/nccl-id",
                 std::vector<uint8_t>(reinterpret_cast<uint8_t *>(&id),
                                      reinterpret_cast<uint8_t *>(&id) + sizeof(id)));
    }
    std::vector<uint8_t> bytes = store->get("rlhf/nccl-id"); // waits, with timeout
    std::memcpy(&id, bytes.data(), sizeof(id));
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, cfg.worldSize, id, cfg.rank) != ncclSuccess)
      throw Error("rank " + std::to_string(cfg.rank) + ": ncclCommInitRank failed");
    return std::make_unique<NcclCommunicator>(cfg, store, comm, cfg.rank, cfg.worldSize,
                                              cfg.rank);
  }

  ~NcclCommunicator() override {
    for (auto &[ptr, bytes] : buffers)
      cudaFree(ptr);
    if (stream)
      cudaStreamDestroy(stream);
    if (comm)
      ncclCommDestroy(comm);
  }

  int rank() const override { return cfg.rank; }
  int size() const override { return cfg.worldSize; }
  const char *backendName() const override { return "nccl"; }

  void allReduceSum(at::Tensor &t) override {
    void *d = stage(t, 0);
    run("all_reduce", [&] {
      return ncclAllReduce(d, d, t.numel(), ncclType(t), ncclSum, comm, stream);
    });
    unstage(t, d);
  }

  void broadcast(at::Tensor &t, int root) override {
    void *d = stage(t, 0);
    run("broadcast", [&] {
      return ncclBroadcast(d, d, t.numel(), ncclType(t), root, comm, stream);
    });
    unstage(t, d);
  }

  at::Tensor allGather(const at::Tensor &input) override {
    at::Tensor in = input.contiguous();
    std::vector<int64_t> shape = in.sizes().vec();
    shape.insert(shape.begin(), cfg.worldSize);
    at::Tensor out = at::empty(shape, in.options());
    void *din = stage(in, 0);
    void *dout = buffer(out.nbytes(), 1);
    run("all_gather", [&] {
      return ncclAllGather(din, dout, in.numel(), ncclType(in), comm, stream);
    });
    unstage(out, dout);
    std::vector<at::Tensor> parts = out.unbind(0);
    return at::cat(parts, 0);
  }

  at::Tensor reduceScatterSum(const at::Tensor &input) override {
    if (std::string why = unevenRows(input, cfg.worldSize); !why.empty())
      throw Error(where("reduce_scatter") + why);
    at::Tensor in = input.contiguous();
    std::vector<int64_t> shape = in.sizes().vec();
    shape[0] /= cfg.worldSize;
    at::Tensor out = at::empty(shape, in.options());
    void *din = stage(in, 0);
    void *dout = buffer(out.nbytes(), 1);
    run("reduce_scatter", [&] {
      return ncclReduceScatter(din, dout, out.numel(), ncclType(in), ncclSum,
                               comm, stream);
    });
    unstage(out, dout);
    return out;
  }

  void send(const at::Tensor &t, int dst) override {
    std::vector<Peer> sends{{t, dst}}, recvs;
    exchange(sends, recvs);
  }

  void recv(at::Tensor &t, int src) override {
    std::vector<Peer> sends, recvs{{t, src}};
    exchange(sends, recvs);
    t.copy_(recvs[0].tensor);
  }

  void exchange(const std::vector<Peer> &sends, std::vector<Peer> &recvs) override {
    std::vector<void *> sbuf, rbuf;
    for (size_t i = 0; i < sends.size(); ++i)
      sbuf.push_back(stage(sends[i].tensor.contiguous(), 2 + i));
    for (size_t i = 0; i < recvs.size(); ++i)
      rbuf.push_back(buffer(recvs[i].tensor.nbytes(), 2 + sends.size() + i));
    run("exchange", [&] {
      ncclGroupStart();
      for (size_t i = 0; i < sends.size(); ++i)
        ncclSend(sbuf[i], sends[i].tensor.numel(), ncclType(sends[i].tensor),
                 sends[i].rank, comm, stream);
      for (size_t i = 0; i < recvs.size(); ++i)
        ncclRecv(rbuf[i], recvs[i].tensor.numel(), ncclType(recvs[i].tensor),
                 recvs[i].rank, comm, stream);
      return ncclGroupEnd();
    });
    for (size_t i = 0; i < recvs.size(); ++i)
      unstage(recvs[i].tensor, rbuf[i]);
  }

  void barrier() override {
    at::Tensor one = at::ones({1}, at::kFloat);
    allReduceSum(one);
  }

  std::unique_ptr<Communicator> subgroup(const std::vector<int> &ranks) override {
    auto it = std::find(ranks.begin(), ranks.end(), cfg.rank);
    int color = it == ranks.end() ? NCCL_SPLIT_NOCOLOR : ranks.front();
    ncclComm_t sub = nullptr;
    if (ncclCommSplit(comm, color, cfg.rank, &sub, nullptr) != ncclSuccess)
      throw Error(where("subgroup") + "ncclCommSplit failed");
    if (it == ranks.end())
      return nullptr;
    return std::make_unique<NcclCommunicator>(cfg, store, sub, int(it - ranks.begin()),
                                              int(ranks.size()), globalRank);
  }

private:
  std::string where(const std::string &op) const {
    return "rank " + std::to_string(globalRank) + ": " + op + " failed: ";
  }

  static void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess)
      throw Error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
  }

  /// A device buffer per slot, grown as needed.
  void *buffer(size_t bytes, size_t slot) {
    if (buffers.size() <= slot)
      buffers.resize(slot + 1, {nullptr, 0});
    auto &[ptr, size] = buffers[slot];
    if (size < bytes) {
      cudaFree(ptr);
      check(cudaMalloc(&ptr, bytes), "malloc");
      size = bytes;
    }
    return ptr;
  }
  void *stage(const at::Tensor &t, size_t slot) {
    at::Tensor c = t.contiguous();
    void *d = buffer(c.nbytes(), slot);
    check(cudaMemcpyAsync(d, c.data_ptr(), c.nbytes(), cudaMemcpyHostToDevice, stream),
          "copy to device");
    return d;
  }
  void unstage(at::Tensor &t, void *d) {
    check(cudaMemcpyAsync(t.data_ptr(), d, t.nbytes(), cudaMemcpyDeviceToHost, stream),
          "copy to host");
    wait("copy to host");
  }

  /// Waits for the stream with the timeout; a dead peer leaves NCCL spinning,
  /// so abort the communicator and report instead of hanging.
  void wait(const std::string &op) {
    auto deadline = std::chrono::steady_clock::now() + cfg.timeout;
    for (;;) {
      cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess)
        return;
      if (e != cudaErrorNotReady)
        throw Error(where(op) + cudaGetErrorString(e));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess || std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm);
        comm = nullptr;
        throw Error(where(op) + (async != ncclSuccess ? ncclGetErrorString(async)
                                                      : "timed out") +
                    "; a peer rank is likely dead or stuck");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  template <typename F> void run(const std::string &op, F &&issue) {
    if (!comm)
      throw Error(where(op) + "the communicator was aborted earlier");
    if (ncclResult_t r = issue(); r != ncclSuccess)
      throw Error(where(op) + ncclGetErrorString(r));
    wait(op);
  }

  RendezvousConfig cfg;
  c10::intrusive_ptr<c10d::Store> store;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int globalRank = 0;
  std::vector<std::pair<void *, size_t>> buffers;
};

} // namespace

std::unique_ptr<Communicator> rlhf::createNcclCommunicator(const RendezvousConfig &cfg) {
  return NcclCommunicator::create(cfg);
}
