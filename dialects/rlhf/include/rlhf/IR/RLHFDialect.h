//===- RLHFDialect.h - the rlhf dialect -------------------------*- C++ -*-===//

#ifndef RLHF_IR_RLHFDIALECT_H
#define RLHF_IR_RLHFDIALECT_H

#include "mlir/IR/Dialect.h"

#include "rlhf/IR/RLHFOpsDialect.h.inc"

#endif // RLHF_IR_RLHFDIALECT_H
