//===- Hierarchy.h - candidates and search on large clusters ----*- C++ -*-===//
//
// Shared by Problem.cpp, which enumerates candidates, and Hierarchy.cpp,
// which plans clusters above kDirectNodes nodes through a scaled-down copy
// of the problem.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_PLANNER_HIERARCHY_H
#define RLHFC_PLANNER_HIERARCHY_H

#include "rlhfc/Planner/Planner.h"

#include "llvm/ADT/ArrayRef.h"

#include <optional>
#include <utility>
#include <vector>

namespace rlhfc::plan::detail {

using Mesh = std::pair<int64_t, int64_t>; ///< (first GPU, GPUs)

/// Clusters of more nodes are planned through a scaled-down copy
/// (Hierarchy.cpp); up to this many, every mesh is searched directly. The
/// benchmark's settings reach 16 nodes and keep their plans; at 32 nodes
/// the direct search took 9.7 s for 4 x 70B PPO, the copy 3.4 s for a plan
/// 0.4% slower (docs/benchmarks.md).
constexpr int64_t kDirectNodes = 16;

/// The meshes of ReaLHF (aligned power-of-two runs inside a node, contiguous
/// whole nodes), widened to any whole-node count; with `halfNodes`, also the
/// runs of an odd number (from 3) of half nodes, starting on a half node.
std::vector<Mesh> meshes(int64_t nodes, int64_t gpn, bool halfNodes = false);

/// Appends to every free call's candidates its strategies on `meshes` that
/// fit (on the whole cluster all of them, elsewhere the fastest few per
/// mesh), and to `fitting` every strategy that fits. Returns the first call
/// left without a candidate, or -1.
int addCandidates(Problem &p, const ProblemOptions &opts,
                  llvm::ArrayRef<Mesh> meshes,
                  std::vector<std::vector<Candidate>> &fitting);

/// Gives each call, from `fitting`, its fastest strategy in every layout
/// that another call of its model has (Problem.cpp).
void shareLayouts(Problem &p,
                  const std::vector<std::vector<Candidate>> &fitting);

/// addCandidates for a cluster above kDirectNodes nodes: the scaled-up
/// candidates of a copy on at most 16 nodes, which it sets as p.coarse,
/// and every strategy on the whole cluster; where no copy scales (a batch
/// or a pin that does not split), the meshes of whole blocks of nodes.
int addLargeClusterCandidates(Problem &p, const ProblemOptions &opts,
                              std::vector<std::vector<Candidate>> &fitting);

/// Nodes per block: partition starts cut the cluster only between blocks.
/// 1 up to kDirectNodes nodes.
int64_t blockNodes(const Problem &p);

/// The search of a problem with a coarse copy: the copy's searched plan
/// scaled up, the baselines, and a descent from the best of them.
std::optional<Assignment> searchScaled(const Problem &p, const SearchOptions &o,
                                       SearchStats &st);

} // namespace rlhfc::plan::detail

#endif // RLHFC_PLANNER_HIERARCHY_H
