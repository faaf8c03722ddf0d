//===- Units.h - unit suffixes of .rlhf numbers -----------------*- C++ -*-===//

#ifndef RLHFC_FRONTEND_UNITS_H
#define RLHFC_FRONTEND_UNITS_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace rlhfc {

enum class UnitDim { None, Bytes, Bandwidth, Flops, Seconds };
llvm::StringRef unitDimName(UnitDim d);

struct Unit {
  const char *name;
  double factor; ///< to bytes, bytes/s, FLOP/s or seconds
  UnitDim dim;
};

/// The unit spelled `name` (case-sensitive: GB is bytes, Gb is bits).
const Unit *lookupUnit(llvm::StringRef name);
std::string knownUnitList();

/// Integers without a fraction ("1024"), everything else in shortest form
/// ("0.95", "1e-06"), for messages and dumps.
std::string formatNumber(double v);

} // namespace rlhfc

#endif // RLHFC_FRONTEND_UNITS_H
