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

RecordType mlir::rlhf::keptRowsType(RecordType drawn, int64_t drawnPrompts,
                                    int64_t keptPrompts) {
  if (drawnPrompts <= 0 || keptPrompts <= 0)
    return nullptr;
  SmallVector<RankedTensorType> types;
  for (RankedTensorType t : drawn.getTypes()) {
    const int64_t rows = t.getDimSize(0);
    if (rows % drawnPrompts)
      return nullptr;
    SmallVector<int64_t> shape(t.getShape());
    shape[0] = rows / drawnPrompts * keptPrompts;
    types.push_back(t.clone(shape));
  }
  return RecordType::get(drawn.getContext(), drawn.getNames(), types);
}

int64_t FilterGroupsOp::getDrawnPrompts() {
  return cast<RankedTensorType>(getMetric().getType()).getDimSize(0) /
         int64_t(getGroup());
}

int64_t FilterGroupsOp::getKeptPrompts() {
  if (std::optional<uint64_t> kept = getPrompts())
    return int64_t(*kept);
  return getDrawnPrompts();
}

LogicalResult
FilterGroupsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                 ValueRange operands, DictionaryAttr attrs,
                                 OpaqueProperties props, RegionRange regions,
                                 SmallVectorImpl<Type> &inferred) {
  // The metric, then the values: each result is its value's kept rows.
  Adaptor adaptor(operands, attrs, props, regions);
  auto metric = dyn_cast<RankedTensorType>(adaptor.getMetric().getType());
  const int64_t group = int64_t(adaptor.getGroup());
  if (!metric || metric.getRank() != 1 || group <= 0)
    return emitOptionalError(loc, "'rlhf.filter_groups' op filters by a "
                                  "score per sequence");
  const int64_t drawn = metric.getDimSize(0) / group;
  const int64_t kept =
      adaptor.getPrompts() ? int64_t(*adaptor.getPrompts()) : drawn;
  for (Value v : adaptor.getValues()) {
    RecordType t = keptRowsType(cast<RecordType>(v.getType()), drawn, kept);
    if (!t)
      return emitOptionalError(
          loc, "'rlhf.filter_groups' op keeps rows per prompt (", drawn,
          ") or per sample (", drawn * group, "), but a value has others");
    inferred.push_back(t);
  }
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
  // Rounds that cannot keep enough prompts would fill every batch.
  // Rounds needed, by division: max_rounds times the draw can overflow.
  const int64_t drawn = getDrawnPrompts(), kept = getKeptPrompts();
  if (kept > 0 && (drawn <= 0 || uint64_t(kept / drawn + (kept % drawn != 0)) >
                                     getMaxRounds()))
    return emitOpError() << "keeps " << getKeptPrompts() << " prompts, more "
                         << "than " << getMaxRounds() << " rounds of "
                         << getDrawnPrompts() << " draw";
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
