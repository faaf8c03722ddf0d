//===- Store.cpp - the job's c10d TCPStore --------------------------------===//

#include "rlhf/runtime/Store.h"
#include "rlhf/runtime/Error.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <thread>
#include <unistd.h>

using namespace rlhf;

namespace {

/// Write-then-rename, so a reader never sees half a number.
void publishPort(const std::string &file, uint16_t port) {
  std::string tmp = file + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << port << "\n";
    if (!out)
      throw Error("cannot write the rendezvous file '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0)
    throw Error("cannot write the rendezvous file '" + file + "'");
}

uint16_t awaitPort(const std::string &file, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream in(file);
    unsigned port = 0;
    if (in >> port && port > 0 && port < 65536)
      return uint16_t(port);
    if (std::chrono::steady_clock::now() >= deadline)
      throw Error("rank 0 did not publish its rendezvous port in '" + file +
                  "' within " + std::to_string(timeout.count()) +
                  " ms; is rank 0 running?");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

} // namespace

c10::intrusive_ptr<c10d::TCPStore>
rlhf::openStore(const RendezvousConfig &cfg) {
  c10d::TCPStoreOptions opts;
  opts.isServer = cfg.rank == 0 && !cfg.agentStore;
  opts.numWorkers = cfg.worldSize;
  opts.timeout = cfg.timeout;
  opts.port = cfg.masterPort;
  if (cfg.masterPort != 0)
    return c10::make_intrusive<c10d::TCPStore>(cfg.masterAddr, opts);
  if (cfg.rank != 0) {
    opts.port = awaitPort(cfg.portFile, cfg.timeout);
    return c10::make_intrusive<c10d::TCPStore>(cfg.masterAddr, opts);
  }
  // The others can only join once they know the port.
  opts.waitWorkers = false;
  auto store = c10::make_intrusive<c10d::TCPStore>(cfg.masterAddr, opts);
  publishPort(cfg.portFile, store->getPort());
  store->waitForWorkers();
  return store;
}

bool rlhf::ranksHaveDistinctDevices(c10d::Store &store,
                                    const RendezvousConfig &cfg,
                                    const std::string &identity) {
  const std::string key = "rlhf/device/";
  store.set(key + std::to_string(cfg.rank),
            std::vector<uint8_t>(identity.begin(), identity.end()));
  std::set<std::string> seen;
  bool distinct = true;
  for (int r = 0; r < cfg.worldSize; ++r) {
    std::vector<uint8_t> v = store.get(key + std::to_string(r)); // waits
    std::string id(v.begin(), v.end());
    distinct = distinct && !id.empty() && seen.insert(id).second;
  }
  return distinct;
}

std::vector<bool> rlhf::ranksSharingMemory(c10d::Store &store,
                                           const RendezvousConfig &cfg,
                                           const std::string &identity,
                                           const std::vector<uint8_t> &offer,
                                           const std::string &offerError,
                                           const SharingTry &tryPeer,
                                           std::string *failure) {
  auto key = [](const char *what, int rank) {
    return std::string("rlhf/sharing/") + what + "/" + std::to_string(rank);
  };
  auto bytes = [](char tag, const std::string &s) {
    std::vector<uint8_t> v{uint8_t(tag)};
    v.insert(v.end(), s.begin(), s.end());
    return v;
  };
  auto text = [](const std::vector<uint8_t> &v) {
    return v.empty() ? std::string() : std::string(v.begin() + 1, v.end());
  };
  std::vector<bool> shares(size_t(cfg.worldSize), false);
  store.set(key("device", cfg.rank), bytes('d', identity));
  if (identity.empty())
    return shares; // "d" alone: no device memory to share
  // 'y' and the offer, or 'n' and why there is none.
  std::vector<uint8_t> mine =
      offerError.empty() ? bytes('y', "") : bytes('n', offerError);
  if (offerError.empty())
    mine.insert(mine.end(), offer.begin(), offer.end());
  store.set(key("offer", cfg.rank), mine);
  auto fail = [&](int peer, const std::string &why) {
    if (failure && failure->empty())
      *failure = "rank " + std::to_string(peer) + ": " + why;
  };
  std::string tried(size_t(cfg.worldSize), '0'); // '1': this rank could map
  std::vector<int> same;
  for (int r = 0; r < cfg.worldSize; ++r) {
    if (r == cfg.rank || text(store.get(key("device", r))) != identity)
      continue; // get waits for the rank to publish
    same.push_back(r);
    std::vector<uint8_t> theirs = store.get(key("offer", r));
    if (!offerError.empty()) {
      fail(cfg.rank, offerError);
    } else if (theirs.empty() || theirs[0] != 'y') {
      fail(r, "cannot share its memory: " + text(theirs));
    } else {
      std::string why =
          tryPeer(r, std::vector<uint8_t>(theirs.begin() + 1, theirs.end()));
      if (why.empty())
        tried[size_t(r)] = '1';
      else
        fail(r, why);
    }
  }
  store.set(key("tried", cfg.rank), bytes('t', tried));
  for (int r : same) {
    std::string theirs = text(store.get(key("tried", r)));
    shares[size_t(r)] = tried[size_t(r)] == '1' &&
                        theirs.size() == size_t(cfg.worldSize) &&
                        theirs[size_t(cfg.rank)] == '1';
  }
  return shares;
}
