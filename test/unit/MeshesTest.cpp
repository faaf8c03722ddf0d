//===- MeshesTest.cpp - the meshes the planner enumerates -----------------===//
//
// ReaLHF's meshes (power-of-two runs inside a node, whole nodes) and, under
// staleness, runs of whole nodes and a half. A generator on whole nodes
// leaves the other calls a whole-node remainder, which whole nodes alone
// often split badly between the two trainers (docs/cost-model.md, "How the
// search finds the split").
//
//===----------------------------------------------------------------------===//

#include "Hierarchy.h"

#include "llvm/ADT/STLExtras.h"

#include <gtest/gtest.h>

#include <set>

using namespace rlhfc::plan::detail;

namespace {

TEST(Meshes, HalfNodeRunsAreOddHalvesFromAHalfNodeBoundary) {
  const std::vector<Mesh> base = meshes(4, 8), wide = meshes(4, 8, true);
  ASSERT_GT(wide.size(), base.size());
  // The narrow meshes first, unchanged: the first search pass keeps to them.
  EXPECT_TRUE(std::equal(base.begin(), base.end(), wide.begin()));
  std::set<Mesh> seen(base.begin(), base.end());
  int added = 0;
  for (size_t i = base.size(); i < wide.size(); ++i) {
    auto [first, size] = wide[i];
    EXPECT_TRUE(seen.insert(wide[i]).second) << first << "+" << size;
    EXPECT_EQ(first % 4, 0) << first;
    EXPECT_EQ(size % 4, 0) << size;
    EXPECT_EQ((size / 4) % 2, 1) << size; // odd halves: not a whole-node size
    EXPECT_GE(size, 12);
    EXPECT_LE(first + size, 32);
    ++added;
  }
  // 3, 5 and 7 halves of the 8 halves of four nodes: 6 + 4 + 2 runs.
  EXPECT_EQ(added, 12);
  for (Mesh m : {Mesh{8, 12}, Mesh{20, 12}, Mesh{4, 20}, Mesh{0, 28}})
    EXPECT_TRUE(llvm::is_contained(wide, m)) << m.first << "+" << m.second;
  // Eight GPUs across a node boundary are a whole-node size, offered at
  // node boundaries only.
  EXPECT_FALSE(llvm::is_contained(wide, Mesh{4, 8}));
}

TEST(Meshes, NoHalfNodeRunsOnOneNodeOrOddNodes) {
  EXPECT_EQ(meshes(1, 8, true), meshes(1, 8));
  EXPECT_EQ(meshes(3, 9, true), meshes(3, 9));
}

} // namespace
