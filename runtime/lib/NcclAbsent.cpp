//===- NcclAbsent.cpp - the NCCL backend of a build without CUDA ----------===//

#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Store.h"

std::unique_ptr<rlhf::Communicator>
rlhf::createNcclCommunicator(const RendezvousConfig &cfg,
                             c10::intrusive_ptr<c10d::TCPStore>) {
  throw Error("rank " + std::to_string(cfg.rank) +
              ": this runtime was built without NCCL (RLHF_ENABLE_CUDA=OFF); "
              "rebuild with CUDA, or set RLHF_BACKEND=gloo");
}

std::unique_ptr<rlhf::Communicator>
rlhf::createNcclCommunicator(const RendezvousConfig &cfg) {
  return createNcclCommunicator(cfg, nullptr);
}
