//===- RLHFFilterOps.cpp - rlhf.filter_groups: dynamic sampling
//------------===//

#include "rlhf/IR/RLHFOps.h"

#include "llvm/ADT/SmallPtrSet.h"

#include <cstdio>

using namespace mlir;
using namespace mlir::rlhf;

//===----------------------------------------------------------------------===//
// Dynamic sampling
//===----------------------------------------------------------------------===//

LogicalResult FilterGroupsOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  // The metric, then the values: each result is its value's kept rows.
  for (Value v : operands.drop_front())
    inferred.push_back(v.getType());
  return success();
}

LogicalResult FilterGroupsOp::verify() {
  auto metric = cast<RankedTensorType>(getMetric().getType());
  if (metric.getRank() != 1 || getTensorKind(metric) != TensorKind::score)
    return emitOpError() << "filters by a score per sequence, not " << metric;
  const int64_t rows = metric.getDimSize(0), group = int64_t(getGroup());
  if (rows % group)
    return emitOpError() << "groups its " << rows << " scores " << group
                         << " at a time, which does not divide them";
  // Kept rows are taken per prompt or per group: every field has either.
  for (Value v : getValues())
    for (Type t : cast<RecordType>(v.getType()).getTypes()) {
      int64_t n = cast<RankedTensorType>(t).getDimSize(0);
      if (n != rows && n != rows / group)
        return emitOpError()
               << "keeps rows per prompt (" << rows / group
               << ") or per sample (" << rows << "), but a value has " << n;
    }
  if (getMinStd().convertToDouble() < 0)
    return emitOpError() << "min_std is negative";
  double expect = getExpectedRounds().convertToDouble();
  if (expect < 1 || expect > double(getMaxRounds())) {
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", expect);
    return emitOpError() << "expects " << shown
                         << " rounds, outside [1, max_rounds = "
                         << getMaxRounds() << "]";
  }
  return success();
}

/// Whether `op`'s results reach `filter`'s operands.
static bool feeds(Operation *op, Operation *filter) {
  SmallVector<Operation *> todo = {op};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!todo.empty()) {
    Operation *o = todo.pop_back_val();
    if (o == filter)
      return true;
    if (!seen.insert(o).second)
      continue;
    for (Operation *user : o->getUsers())
      todo.push_back(user);
  }
  return false;
}

double mlir::rlhf::expectedRounds(Operation *op) {
  Block *block = op->getBlock();
  if (!block)
    return 1.0;
  for (auto filter : block->getOps<FilterGroupsOp>())
    if (op != filter.getOperation() && feeds(op, filter))
      return filter.getExpectedRounds().convertToDouble();
  return 1.0;
}
