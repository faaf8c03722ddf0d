//===- Properties.h - the properties of each declaration --------*- C++ -*-===//
//
// What `hardware`, `arch`, `model`, `cluster`, `dataset` and `run` blocks
// may set. One table per kind serves Sema (unknown and missing
// properties) and completion in the language server. Keep lang/README.md's
// tables in sync.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_FRONTEND_PROPERTIES_H
#define RLHFC_FRONTEND_PROPERTIES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <vector>

namespace rlhfc {

enum class PropType {
  Int,
  Float,
  Bytes,
  Bandwidth,
  Flops,
  String,
  Flag,
  Name,
  Call,
  NameList
};

struct PropSpec {
  const char *name;
  PropType type;
  bool required;
  const char *summary = "";
};

inline const PropSpec kHardwareProps[] = {
    {"bf16_flops", PropType::Flops, true, "dense BF16 peak, e.g. 989TFLOPS"},
    {"hbm", PropType::Bytes, true, "memory capacity, e.g. 80GB"},
    {"hbm_bandwidth", PropType::Bandwidth, true,
     "memory bandwidth, e.g. 3.35TBps"},
    {"nvlink_bandwidth", PropType::Bandwidth, true,
     "intra-node bandwidth per GPU, one direction"},
    {"network_bandwidth", PropType::Bandwidth, true,
     "inter-node bandwidth per GPU, one direction"},
    {"host_bandwidth", PropType::Bandwidth, false,
     "link to host memory (PCIe) per GPU, one direction; needed to offload"},
};
inline const PropSpec kArchProps[] = {
    {"layers", PropType::Int, true, "decoder layers"},
    {"hidden", PropType::Int, true, "hidden size"},
    {"heads", PropType::Int, true, "attention (query) heads"},
    {"kv_heads", PropType::Int, false,
     "key/value heads (grouped-query attention); default: heads"},
    {"ffn", PropType::Int, true, "SwiGLU intermediate size"},
    {"vocab", PropType::Int, true, "vocabulary size"},
    {"max_seq", PropType::Int, false, "longest sequence; default 4096"},
    {"tie_embeddings", PropType::Flag, false,
     "the lm head shares the embedding's weights"},
    {"qkv_bias", PropType::Flag, false,
     "q, k and v projections with biases, as Qwen2"},
    {"rope_theta", PropType::Float, false, "rotary base; default 10000"},
    {"norm_eps", PropType::Float, false, "RMSNorm epsilon; default 1e-5"},
    {"rope_scaling", PropType::Call, false,
     "llama3(factor = 8, ...): LLaMA-3.1's long-context RoPE"},
};
inline const PropSpec kModelOnlyProps[] = {
    {"trainable", PropType::Flag, false,
     "the model is trained; only trainable models may call train"},
    {"frozen", PropType::Flag, false, "not trained (the default)"},
    {"head", PropType::Name, false,
     "lm (next-token logits, the default) or value (critics and reward "
     "models)"},
    {"optimizer", PropType::Call, false,
     "adam(...) or adamw(...): lr, betas, weight decay, clipping, schedule"},
    {"checkpoint", PropType::String, false,
     "the weights a compiled program starts from: a Hugging Face directory, "
     "an rlhfc checkpoint or a .safetensors file"},
    {"tokenizer", PropType::String, false,
     "a sentencepiece .model, or a Hugging Face tokenizer.json or its "
     "directory"},
};
inline const PropSpec kClusterProps[] = {
    {"nodes", PropType::Int, true, "machines"},
    {"gpus_per_node", PropType::Int, true, "GPUs in each machine"},
};
inline const PropSpec kDatasetProps[] = {
    {"path", PropType::String, true, "the JSONL file, one object per row"},
    {"batch", PropType::Int, true, "rows per iteration"},
    {"max_prompt_len", PropType::Int, true, "padded prompt length in tokens"},
    {"max_response_len", PropType::Int, false,
     "padded response length in tokens; default 0"},
    {"fields", PropType::NameList, true,
     "the columns read, e.g. [prompt, answer]"},
    {"template", PropType::String, false,
     "each row's prompt, from its columns: \"Q: {question}\\nA:\""},
};
inline const PropSpec kRunProps[] = {
    {"steps", PropType::Int, true, "iterations to run"},
    {"seed", PropType::Int, false, "random seed; default 1"},
    {"save_interval", PropType::Int, false,
     "steps between checkpoints (and one at the end); 0, the default: none"},
    {"cluster", PropType::Name, false,
     "the cluster to run on; default: the only one declared"},
    {"staleness", PropType::Int, false,
     "versions generation may run ahead of training (asynchronous RL); "
     "default 0"},
    {"eval", PropType::Name, false,
     "a held-out dataset: rewards of generated samples, or a validation "
     "loss, in OUT/eval.jsonl"},
    {"eval_interval", PropType::Int, false,
     "steps between evaluations; 0, the default: before the first step and "
     "after the last only"},
    {"eval_samples", PropType::Int, false,
     "samples per held-out prompt; 1, the default: one greedy sample"},
};

/// The settings of `@place(...)` before a model call (lang/README §4).
inline const PropSpec kPlaceSettings[] = {
    {"mesh", PropType::Call, false,
     "the GPUs: a cluster or a slice of one, e.g. local[0:4]"},
    {"dp", PropType::Int, false, "data-parallel degree"},
    {"tp", PropType::Int, false, "tensor-parallel degree (within a node)"},
    {"pp", PropType::Int, false, "pipeline stages"},
    {"sp", PropType::Int, false,
     "sequence-parallel degree (Ulysses in a node, ring attention across)"},
    {"mbs", PropType::Int, false, "micro-batches per data-parallel rank"},
    {"offload", PropType::Flag, false,
     "a frozen model's weights rest in host memory between its calls"},
    {"recompute", PropType::Flag, false,
     "train: recompute activations in the backward pass"},
    {"zero", PropType::Flag, false,
     "train: slice Adam's state over data parallelism (ZeRO-1)"},
};

/// The properties a block opened by `keyword` (hardware, arch, model,
/// cluster, dataset, run) may set, in table order; empty for another
/// keyword. A model's are its own, then its arch's.
std::vector<PropSpec> declarationProps(llvm::StringRef keyword);

} // namespace rlhfc

#endif // RLHFC_FRONTEND_PROPERTIES_H
