//===- RLHFOps.cpp - rlhf dialect operations ------------------------------===//

#include "rlhf/IR/RLHFOps.h"

using namespace mlir;
using namespace mlir::rlhf;

#define GET_OP_CLASSES
#include "rlhf/IR/RLHFOps.cpp.inc"
