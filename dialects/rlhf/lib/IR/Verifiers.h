//===- Verifiers.h - verifier helpers the op files share -------*- C++ -*-===//
//
// Checks of layouts and symbols that the verifiers of several op files
// (RLHFOps.cpp, RLHFMoveOps.cpp, RLHFAlgorithmOp.cpp) make alike. Internal to
// the dialect.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_LIB_IR_VERIFIERS_H
#define RLHF_LIB_IR_VERIFIERS_H

#include "rlhf/IR/RLHFOps.h"

namespace mlir::rlhf::verifiers {

/// `value` within [lo, hi] (the bounds Sema sets), else an error naming
/// `what`. ODS's I64Attr getters are unsigned: callers pass them signed.
LogicalResult checkRange(Operation *op, StringRef what, int64_t value,
                         int64_t lo, int64_t hi);

/// A mesh and strategy go together, and the strategy fills the mesh.
LogicalResult verifyLayout(Operation *op, MeshAttr mesh, StrategyAttr strategy,
                           StringRef what = "");

/// The mesh lies within the cluster's GPUs.
LogicalResult verifyMeshOnCluster(Operation *op, ClusterOp cluster,
                                  MeshAttr mesh, StringRef what = "");

/// Against the cluster: the mesh fits, and every tensor-parallel group stays
/// inside one node (ranks are tp-major within the mesh).
LogicalResult verifyLayoutOnCluster(Operation *op, ClusterOp cluster,
                                    MeshAttr mesh, StrategyAttr strategy,
                                    StringRef what = "");

/// The cluster of the algorithm `op` is in, or null.
ClusterOp clusterOf(Operation *op, SymbolTableCollection &symbols);

/// The rlhf.model `ref` names, else an error on `op`.
FailureOr<ModelOp> lookupModel(Operation *op, SymbolTableCollection &symbols,
                               FlatSymbolRefAttr ref);

} // namespace mlir::rlhf::verifiers

#endif // RLHF_LIB_IR_VERIFIERS_H
