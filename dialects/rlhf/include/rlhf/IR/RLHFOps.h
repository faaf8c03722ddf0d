//===- RLHFOps.h - rlhf dialect operations ----------------------*- C++ -*-===//

#ifndef RLHF_IR_RLHFOPS_H
#define RLHF_IR_RLHFOPS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "rlhf/IR/RLHFDialect.h"

#define GET_OP_CLASSES
#include "rlhf/IR/RLHFOps.h.inc"

#endif // RLHF_IR_RLHFOPS_H
