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
    and rewards, and, after planning, the device mesh and parallel strategy
    of every call plus the parameter reallocations and data transfers between
    them. A planned module is the whole plan.

    Values are builtin tensors whose encoding is a `#rlhf.kind<...>` saying
    what they hold (token ids, logprobs, values...), grouped into
    `!rlhf.record<...>` types by the calls that produce them.
  }];
  let cppNamespace = "::mlir::rlhf";
  // Function bodies use arith and math for elementwise arithmetic.
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
    void registerTypes();
  }];
}

class RLHF_Op<string mnemonic, list<Trait> traits = []> :
    Op<RLHF_Dialect, mnemonic, traits>;

#endif // RLHF_DIALECT_TD
