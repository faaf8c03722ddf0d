//===- RLHFOps.td - rlhf dialect operations ----------------*- tablegen -*-===//

#ifndef RLHF_OPS_TD
#define RLHF_OPS_TD

include "rlhf/IR/RLHFDialect.td"
include "mlir/IR/SymbolInterfaces.td"

def RLHF_ModelOp : RLHF_Op<"model", [Symbol]> {
  let summary = "declares a model taking part in the algorithm";
  let description = [{
    Declares a named LLM (actor, critic, reference, reward...). Calls refer to
    it by symbol. `trainable` marks models that `train_step` may update.

    ```mlir
    rlhf.model @actor trainable
    rlhf.model @ref
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, UnitAttr:$trainable);
  let assemblyFormat = "$sym_name (`trainable` $trainable^)? attr-dict";
}

#endif // RLHF_OPS_TD
