//===- RLHFDialect.cpp - the rlhf dialect ---------------------------------===//

#include "rlhf/IR/RLHFDialect.h"
#include "rlhf/IR/RLHFOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::rlhf;

#include "rlhf/IR/RLHFOpsDialect.cpp.inc"

void RLHFDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "rlhf/IR/RLHFOps.cpp.inc"
      >();
  registerAttributes();
  registerTypes();
}
