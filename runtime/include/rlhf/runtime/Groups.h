//===- Groups.h - the process groups of a layout ----------------*- C++ -*-===//

#ifndef RLHF_RUNTIME_GROUPS_H
#define RLHF_RUNTIME_GROUPS_H

#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/ReallocPlan.h"

#include <memory>

namespace rlhf {

/// This rank's tensor-, pipeline- and data-parallel groups in `layout`
/// (null where this rank is outside the mesh or the degree is 1), and its
/// coordinates. Every rank of `world` must call it with the same layout:
/// groups are created collectively, in one order.
struct ParallelGroups {
  std::unique_ptr<Communicator> tp, pp, dp;
  int tpRank = 0, stage = 0, dpRank = 0;
  bool member = false;
};

ParallelGroups makeGroups(Communicator &world, const Layout &layout);

/// USP's sub-groups of the sequence-parallel groups of `layout`, whose
/// pipeline slot holds sp (pp = 1 under sp; sp ranks run between dp and
/// tp): this rank's Ulysses group (sp / ring consecutive sp ranks) and ring
/// group (every (sp / ring)-th), as LlamaModel's SequenceParallel orders
/// them. Null where a group is a single rank or the whole sp group (the
/// model then uses the sp group) or this rank is outside. Collective like
/// makeGroups.
std::pair<std::unique_ptr<Communicator>, std::unique_ptr<Communicator>>
makeSeqGroups(Communicator &world, const Layout &layout, int ring);

} // namespace rlhf

#endif // RLHF_RUNTIME_GROUPS_H
