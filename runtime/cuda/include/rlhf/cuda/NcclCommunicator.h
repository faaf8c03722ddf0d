//===- NcclCommunicator.h - the NCCL backend --------------------*- C++ -*-===//
//
// The same Communicator interface over NCCL. Rendezvous goes through the
// c10d TCPStore (rank 0 publishes the NCCL unique id); every operation runs
// on this rank's CUDA device and is polled against the timeout, aborting
// the communicator (and throwing rlhf::Error naming the rank) when a peer
// dies. Host tensors are staged through device buffers, so the interface
// stays the one the Gloo backend implements. Built only with the CUDA
// toolkit; exercised only where a GPU is present.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_CUDA_NCCLCOMMUNICATOR_H
#define RLHF_CUDA_NCCLCOMMUNICATOR_H

#include "rlhf/runtime/Communicator.h"

namespace rlhf {

/// Uses CUDA device LOCAL_RANK. Throws rlhf::Error when there is no device.
std::unique_ptr<Communicator> createNcclCommunicator(const RendezvousConfig &cfg);

} // namespace rlhf

#endif // RLHF_CUDA_NCCLCOMMUNICATOR_H
