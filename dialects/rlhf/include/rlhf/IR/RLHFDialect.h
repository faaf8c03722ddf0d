//===- RLHFDialect.h - the rlhf dialect -------------------------*- C++ -*-===//

#ifndef RLHF_IR_RLHFDIALECT_H
#define RLHF_IR_RLHFDIALECT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include <optional>

#include "rlhf/IR/RLHFOpsDialect.h.inc"

// Float attribute parameters (rates, sizes, settings) parse as doubles.
namespace mlir {
template <>
struct FieldParser<llvm::APFloat> {
  static FailureOr<llvm::APFloat> parse(AsmParser &parser) {
    double v;
    if (parser.parseFloat(v))
      return failure();
    return llvm::APFloat(v);
  }
};
} // namespace mlir

#include "rlhf/IR/RLHFEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "rlhf/runtime/ReallocPlan.h"
#include "rlhf/IR/RLHFAttrs.h.inc"
#define GET_TYPEDEF_CLASSES
#include "rlhf/IR/RLHFOpsTypes.h.inc"

namespace mlir::rlhf {

/// The #rlhf.kind encoding of `type`, if it is a ranked tensor with one.
std::optional<TensorKind> getTensorKind(Type type);

/// `tensor<shape x elt, #rlhf.kind<kind>>`.
RankedTensorType getKindedTensorType(MLIRContext *ctx, ArrayRef<int64_t> shape,
                                     Type elementType, TensorKind kind);

} // namespace mlir::rlhf

#endif // RLHF_IR_RLHFDIALECT_H
