//===- GlooCommunicator.cpp - c10d Gloo backend ---------------------------===//

#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Error.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

using namespace rlhf;

namespace {

// c10::Error appends a C++ backtrace; users need the first line only.
std::string firstLine(std::string msg) {
  if (auto nl = msg.find('\n'); nl != std::string::npos)
    msg.resize(nl);
  return msg;
}

class GlooCommunicator final : public Communicator {
public:
  GlooCommunicator(const RendezvousConfig &cfg) : cfg(cfg) {
    try {
      c10d::TCPStoreOptions opts;
      opts.port = cfg.masterPort;
      opts.isServer = cfg.rank == 0;
      opts.numWorkers = cfg.worldSize;
      opts.waitWorkers = true;
      opts.timeout = cfg.timeout;
      store = c10::make_intrusive<c10d::TCPStore>(cfg.masterAddr, opts);
      auto pgOpts = c10d::ProcessGroupGloo::Options::create(cfg.timeout);
      pgOpts->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(
              cfg.masterAddr == "localhost" ? "127.0.0.1" : hostAddr()));
      pg = c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>("rlhf/world", store), cfg.rank,
          cfg.worldSize, pgOpts);
    } catch (const std::exception &e) {
      throw Error(where("rendezvous at " + cfg.masterAddr + ":" +
                        std::to_string(cfg.masterPort)) +
                  firstLine(e.what()));
    }
  }

  int rank() const override { return cfg.rank; }
  int size() const override { return cfg.worldSize; }
  const char *backendName() const override { return "gloo"; }

  void allReduceSum(at::Tensor &t) override {
    std::vector<at::Tensor> ts{t};
    run("all_reduce", [&] { return pg->allreduce(ts); });
  }

  void broadcast(at::Tensor &t, int root) override {
    std::vector<at::Tensor> ts{t};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    run("broadcast", [&] { return pg->broadcast(ts, o); });
  }

  void barrier() override {
    run("barrier", [&] { return pg->barrier(); });
  }

private:
  // Loopback workers bind to loopback; others bind to the address they use
  // to reach the master, which Gloo resolves from the hostname.
  std::string hostAddr() const {
    const std::string &a = cfg.masterAddr;
    if (a.rfind("127.", 0) == 0)
      return a;
    char buf[256];
    if (gethostname(buf, sizeof(buf)) == 0)
      return buf;
    return a;
  }

  std::string where(const std::string &op) const {
    return "rank " + std::to_string(cfg.rank) + "/" +
           std::to_string(cfg.worldSize) + ": " + op + " failed: ";
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
};

} // namespace

std::unique_ptr<Communicator>
rlhf::createGlooCommunicator(const RendezvousConfig &cfg) {
  return std::make_unique<GlooCommunicator>(cfg);
}
