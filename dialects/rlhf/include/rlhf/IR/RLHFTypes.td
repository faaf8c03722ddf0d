//===- RLHFTypes.td - rlhf types ---------------------------*- tablegen -*-===//

#ifndef RLHF_TYPES_TD
#define RLHF_TYPES_TD

include "mlir/IR/AttrTypeBase.td"
include "rlhf/IR/RLHFDialect.td"

def RLHF_RecordType : TypeDef<RLHF_Dialect, "Record"> {
  let mnemonic = "record";
  let summary = "a batch of named tensors";
  let description = [{
    What a model call or host function produces: named fields, each a ranked
    tensor over the batch (and sequence) with a `#rlhf.kind` encoding.

    ```mlir
    !rlhf.record<seq: tensor<512x256xi32, #rlhf.kind<tokens>>,
                 logprobs: tensor<512x256xf32, #rlhf.kind<logprobs>>>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr">:$names,
                        ArrayRefParameter<"::mlir::RankedTensorType">:$types);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The type of field `name`, or null.
    ::mlir::RankedTensorType getFieldType(::llvm::StringRef name) const;
  }];
}

#endif // RLHF_TYPES_TD
