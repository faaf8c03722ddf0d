//===- RLHFDialect.td - the rlhf dialect -------------------*- tablegen -*-===//

#ifndef RLHF_DIALECT_TD
#define RLHF_DIALECT_TD

include "mlir/IR/OpBase.td"

def RLHF_Dialect : Dialect {
  let name = "rlhf";
  let summary = "RLHF dataflow programs: models, calls, placement and movement";
  let description = [{
    The `rlhf` dialect holds one iteration of an RLHF algorithm: the cluster,
    model and dataset declarations, the model calls (`generate`, `inference`,
    `train_step`) with their data dependencies, host compute for advantages
    and losses, and, after planning, the device mesh and parallel strategy of
    every call plus the parameter reallocations and data transfers between
    them.
  }];
  let cppNamespace = "::mlir::rlhf";
}

class RLHF_Op<string mnemonic, list<Trait> traits = []> :
    Op<RLHF_Dialect, mnemonic, traits>;

#endif // RLHF_DIALECT_TD
