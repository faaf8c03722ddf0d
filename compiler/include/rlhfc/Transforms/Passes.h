//===- Passes.h - rlhf planning passes --------------------------*- C++ -*-===//

#ifndef RLHFC_TRANSFORMS_PASSES_H
#define RLHFC_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "rlhf/IR/RLHFDialect.h"

namespace rlhfc {

#define GEN_PASS_DECL
#include "rlhfc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "rlhfc/Transforms/Passes.h.inc"

} // namespace rlhfc

#endif // RLHFC_TRANSFORMS_PASSES_H
