//===- Store.h - the job's c10d TCPStore ------------------------*- C++ -*-===//
//
// Rank 0 hosts the store, the others connect. With MASTER_PORT=0 rank 0 lets
// the kernel pick the port and publishes it in RLHF_RENDEZVOUS_FILE; picking
// a free port in the launcher and releasing it races with every other job on
// the host.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_STORE_H
#define RLHF_RUNTIME_STORE_H

#include "rlhf/runtime/Rendezvous.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rlhf {

class Communicator;

/// Opens the job's store and waits until every rank has joined it. Throws
/// rlhf::Error when the port file does not appear within cfg.timeout.
c10::intrusive_ptr<c10d::TCPStore> openStore(const RendezvousConfig &cfg);

/// Whether every rank has a device of its own: each publishes `identity`
/// (its device's, ipc::deviceUuid) in `store` and reads everyone's, so all
/// ranks get the same answer. False when any identity is empty or two are
/// equal (ranks sharing a GPU).
bool ranksHaveDistinctDevices(c10d::Store &store, const RendezvousConfig &cfg,
                              const std::string &identity);

/// Tries one peer's offer (what ranksSharingMemory exchanged): empty when
/// this rank could use it, else why not.
using SharingTry =
    std::function<std::string(int peer, const std::vector<uint8_t> &offer)>;

/// Which ranks this one shares device memory with, by rank (false for
/// itself): ranks that publish the same non-empty `identity` each publish
/// `offer` (or, where `offerError` says why, none), try every such peer's
/// offer, and share with a peer only where both tries worked. Every rank of
/// the job calls it; ranks with an identity wait for all to publish. The
/// first failure a try or a peer met goes to `failure` ("rank P: why").
std::vector<bool> ranksSharingMemory(c10d::Store &store,
                                     const RendezvousConfig &cfg,
                                     const std::string &identity,
                                     const std::vector<uint8_t> &offer,
                                     const std::string &offerError,
                                     const SharingTry &tryPeer,
                                     std::string *failure);

/// The backends of Communicator.h over a store opened already (by
/// openStore, for the same job). A Gloo world on `device` (CUDA) finds the
/// ranks that share its GPU and can map each other's memory (ipc::).
std::unique_ptr<Communicator>
createGlooCommunicator(const RendezvousConfig &cfg,
                       c10::intrusive_ptr<c10d::TCPStore> store,
                       c10::Device device = c10::Device(c10::kCPU));
std::unique_ptr<Communicator>
createNcclCommunicator(const RendezvousConfig &cfg,
                       c10::intrusive_ptr<c10d::TCPStore> store);

} // namespace rlhf

#endif // RLHF_RUNTIME_STORE_H
