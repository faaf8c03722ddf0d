//===- RLHFEnums.td - rlhf enumerations --------------------*- tablegen -*-===//

#ifndef RLHF_ENUMS_TD
#define RLHF_ENUMS_TD

include "mlir/IR/EnumAttr.td"
include "rlhf/IR/RLHFDialect.td"

def RLHF_TensorKind : I32EnumAttr<"TensorKind", "what a tensor holds", [
    I32EnumAttrCase<"tokens", 0>,
    I32EnumAttrCase<"answer", 1>,
    I32EnumAttrCase<"mask", 2>,
    I32EnumAttrCase<"logprobs", 3>,
    I32EnumAttrCase<"values", 4>,
    I32EnumAttrCase<"score", 5>,
    I32EnumAttrCase<"advantages", 6>,
    I32EnumAttrCase<"returns", 7>,
    I32EnumAttrCase<"loss", 8>,
    // Computed by a function and of no particular kind: `number[N, S]`.
    I32EnumAttrCase<"number", 9>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::rlhf";
}

def RLHF_Head : I32EnumAttr<"Head", "the output head of a model", [
    I32EnumAttrCase<"lm", 0>,
    I32EnumAttrCase<"value", 1>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::rlhf";
}

// Advantages, shaping and losses are functions written in the language
// (kind `fn`, their body a region); the others compare decoded text, which
// the language cannot express.
def RLHF_ComputeKind : I32EnumAttr<"ComputeKind",
    "host functions: rewards, advantages and reward shaping", [
    I32EnumAttrCase<"fn", 0>,
    I32EnumAttrCase<"exact_match", 1>,
    I32EnumAttrCase<"script_reward", 2>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::rlhf";
}

// Reductions and model outputs in the bodies of .rlhf functions.
def RLHF_ReduceOver : I32EnumAttr<"ReduceOver", "what a reduction runs over", [
    I32EnumAttrCase<"seq", 0>,
    I32EnumAttrCase<"group", 1>,
    I32EnumAttrCase<"batch", 2>,
    I32EnumAttrCase<"token", 3>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::rlhf";
}

def RLHF_ReduceStat : I32EnumAttr<"ReduceStat", "the statistic a reduction takes", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"var", 2>,
    I32EnumAttrCase<"std", 3>,
    I32EnumAttrCase<"max", 4>,
    I32EnumAttrCase<"min", 5>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::rlhf";
}

def RLHF_ModelOutput : I32EnumAttr<"ModelOutput",
    "what a loss reads from the model it trains", [
    I32EnumAttrCase<"logprobs", 0>,
    I32EnumAttrCase<"values", 1>,
    I32EnumAttrCase<"score", 2>,
    I32EnumAttrCase<"entropy", 3>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::rlhf";
}

def RLHF_TensorKindAttr : EnumAttr<RLHF_Dialect, RLHF_TensorKind, "kind"> {
  let summary = "what a tensor holds; used as the encoding of builtin tensors";
  let description = [{
    `tensor<512x256xi32, #rlhf.kind<tokens>>` holds token ids;
    `tensor<512x256xf32, #rlhf.kind<logprobs>>` holds log-probabilities of
    the same shape. Verifiers use the kind to reject, say, logprobs where
    token ids are needed.
  }];
  let assemblyFormat = "`<` $value `>`";
}

def RLHF_HeadAttr : EnumAttr<RLHF_Dialect, RLHF_Head, "head"> {
  let summary = "lm (next-token logits) or value (one scalar per token)";
  let assemblyFormat = "$value";
}

def RLHF_ComputeKindAttr : EnumAttr<RLHF_Dialect, RLHF_ComputeKind, "compute"> {
  let summary = "which host function an `rlhf.compute` runs";
  let assemblyFormat = "$value";
}

def RLHF_ReduceOverAttr : EnumAttr<RLHF_Dialect, RLHF_ReduceOver, "reduce_over"> {
  let summary = "what an `rlhf.reduce` runs over";
  let assemblyFormat = "$value";
}

def RLHF_ReduceStatAttr : EnumAttr<RLHF_Dialect, RLHF_ReduceStat, "reduce_stat"> {
  let summary = "the statistic an `rlhf.reduce` takes";
  let assemblyFormat = "$value";
}

def RLHF_ModelOutputAttr : EnumAttr<RLHF_Dialect, RLHF_ModelOutput, "model_output"> {
  let summary = "what an `rlhf.model_output` reads";
  let assemblyFormat = "$value";
}

#endif // RLHF_ENUMS_TD
