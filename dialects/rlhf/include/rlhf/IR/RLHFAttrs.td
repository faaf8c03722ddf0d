//===- RLHFAttrs.td - rlhf attributes ----------------------*- tablegen -*-===//

#ifndef RLHF_ATTRS_TD
#define RLHF_ATTRS_TD

include "mlir/IR/AttrTypeBase.td"
include "rlhf/IR/RLHFDialect.td"
include "rlhf/IR/RLHFEnums.td"

class RLHF_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<RLHF_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def RLHF_ArchAttr : RLHF_Attr<"Arch", "arch"> {
  let summary = "a LLaMA-style decoder architecture";
  let description = [{
    The shape of a decoder-only transformer with RMSNorm, RoPE, SwiGLU and
    grouped-query attention: everything the cost model and the runtime need.
    The numerics a Hugging Face checkpoint brings (`: hf("dir")`) follow,
    printed only where they differ from LLaMA-2's: q/k/v biases (Qwen2), the
    rope base, the RMSNorm epsilon and LLaMA-3's rope scaling (a factor of 0
    means none).

    ```mlir
    #rlhf.arch<name = "llama2_7b", layers = 32, hidden = 4096, heads = 32,
               kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096,
               tie_embeddings = false>
    #rlhf.arch<name = "Qwen2.5-0.5B", layers = 24, hidden = 896, heads = 14,
               kv_heads = 2, ffn = 4864, vocab = 151936, max_seq = 32768,
               tie_embeddings = true, qkv_bias = true,
               rope_theta = 1.000000e+06, norm_eps = 9.9999999999999995E-7>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"preset name">:$name,
    "int64_t":$layers, "int64_t":$hidden, "int64_t":$heads,
    "int64_t":$kv_heads, "int64_t":$ffn, "int64_t":$vocab, "int64_t":$max_seq,
    "bool":$tie_embeddings,
    DefaultValuedParameter<"bool", "false">:$qkv_bias,
    DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(10000.0)">:$rope_theta,
    DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(1e-5)">:$norm_eps,
    DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(0.0)">:$rope_factor,
    DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(1.0)">:$rope_low_freq_factor,
    DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(4.0)">:$rope_high_freq_factor,
    DefaultValuedParameter<"int64_t", "8192">:$rope_original_max_seq);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Parameters of the decoder with an lm head, or with a value head.
    int64_t getParamCount(bool valueHead) const;
    /// The decoder's shape as the runtime's parameter list sees it.
    ::rlhf::ModelShape getShape(bool valueHead) const;
  }];
}

def RLHF_HardwareAttr : RLHF_Attr<"Hardware", "hardware"> {
  let summary = "per-GPU peak compute, memory and link bandwidths";
  let description = [{
    Rates are in SI base units: FLOP/s, bytes and bytes/s. Link bandwidths
    are per GPU in one direction. `host_bandwidth` is the GPU's link to host
    memory (PCIe); 0 when unknown, which rules out offloading.

    ```mlir
    #rlhf.hardware<name = "H100_SXM", bf16_flops = 9.89e+14, hbm = 8.0e+10,
                   hbm_bandwidth = 3.35e+12, nvlink_bandwidth = 4.5e+11,
                   network_bandwidth = 5.0e+10>
    ```
  }];
  let parameters = (ins StringRefParameter<"preset name">:$name,
    APFloatParameter<"">:$bf16_flops, APFloatParameter<"">:$hbm, APFloatParameter<"">:$hbm_bandwidth,
    APFloatParameter<"">:$nvlink_bandwidth, APFloatParameter<"">:$network_bandwidth,
    DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(0.0)">:$host_bandwidth);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def RLHF_OptimizerAttr : RLHF_Attr<"Optimizer", "optimizer"> {
  let summary = "optimizer settings of a trainable model";
  let description = [{
    Adam's settings and the learning rate per iteration the model trains
    (1-based; the run's step less its train calls' `frozen_steps`):
    `warmup_steps` iterations rise linearly to `lr` (iteration i of them at
    lr * i / warmup_steps, as Megatron warms up), then `schedule` runs from
    `lr` to `min_lr` at iteration `decay_steps` (0: the iterations the run
    trains it) and stays there: `constant` keeps `lr`, `linear`
    falls in a line, `cosine` along half a cosine. Every optimizer step of
    an iteration (one per minibatch and epoch) uses that iteration's rate.
    The schedule's settings are left out when they are the defaults.

    ```mlir
    #rlhf.optimizer<kind = "adam", lr = 1.0e-06, beta1 = 0.9, beta2 = 0.95,
                    eps = 1.0e-08, weight_decay = 0.0, grad_clip = 1.0,
                    schedule = "cosine", warmup_steps = 10, min_lr = 1.0e-07>
    ```
  }];
  let parameters = (ins StringRefParameter<"adam or adamw">:$kind, APFloatParameter<"">:$lr,
    APFloatParameter<"">:$beta1, APFloatParameter<"">:$beta2, APFloatParameter<"">:$eps, APFloatParameter<"">:$weight_decay,
    APFloatParameter<"">:$grad_clip,
    StringRefParameter<"constant, linear or cosine", [{"constant"}]>:$schedule,
    DefaultValuedParameter<"int64_t", "0">:$warmup_steps,
    DefaultValuedParameter<"int64_t", "0">:$decay_steps,
    DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(0.0)">:$min_lr);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def RLHF_MeshAttr : RLHF_Attr<"Mesh", "mesh"> {
  let summary = "a device mesh: a contiguous range of the cluster's GPUs";
  let description = [{
    GPUs are numbered node-major: GPU `g` is local GPU `g % gpus_per_node` of
    node `g / gpus_per_node`. `#rlhf.mesh<8, 8>` is the second node of an
    8-GPU-per-node cluster; `#rlhf.mesh<0, 4>` is the first half of the first.
  }];
  let parameters = (ins "int64_t":$first, "int64_t":$size);
  let assemblyFormat = "`<` $first `,` $size `>`";
  let genVerifyDecl = 1;
}

def RLHF_StrategyAttr : RLHF_Attr<"Strategy", "strategy"> {
  let summary = "a 3D parallel strategy with micro-batching";
  let description = [{
    Data, tensor and pipeline parallel degrees and the number of
    micro-batches per data-parallel rank. `dp * sp * tp * pp` must equal
    the size of the mesh the strategy runs on. `zero` shards the optimizer
    state of a train call over every rank that holds the same weights
    (dp x sp); `recompute` recomputes each decoder layer in backward
    instead of keeping its activations.
    `offload` keeps a frozen model's weights in host memory between calls:
    they are loaded (`rlhf.onload`) before the call and released
    (`rlhf.offload`) after it.
    `sp` is the sequence-parallel degree: each of `sp` ranks holds 1/sp of
    every sequence; the ranks inside a node all-to-all q/k/v over heads
    (Ulysses) and the rest form a ring that passes keys and values
    around (unified sequence parallelism). Weights are replicated over sp as
    over dp, so ranks run dp-major, then sp, then pp and tp.

    ```mlir
    #rlhf.strategy<dp = 2, tp = 4, pp = 1, mbs = 4>
    #rlhf.strategy<dp = 8, tp = 1, pp = 1, mbs = 1, zero = true, recompute = true>
    #rlhf.strategy<dp = 8, tp = 1, pp = 1, mbs = 1, offload = true>
    #rlhf.strategy<dp = 2, tp = 2, pp = 1, mbs = 1, sp = 4>
    ```
  }];
  let parameters = (ins "int64_t":$dp, "int64_t":$tp, "int64_t":$pp, "int64_t":$mbs,
    DefaultValuedParameter<"bool", "false">:$zero,
    DefaultValuedParameter<"bool", "false">:$recompute,
    DefaultValuedParameter<"bool", "false">:$offload,
    DefaultValuedParameter<"int64_t", "1">:$sp);
  // Without sp: the layouts most calls have.
  let builders = [
    AttrBuilder<(ins "int64_t":$dp, "int64_t":$tp, "int64_t":$pp,
                     "int64_t":$mbs, "bool":$zero, "bool":$recompute,
                     "bool":$offload), [{
      return $_get($_ctxt, dp, tp, pp, mbs, zero, recompute, offload, 1);
    }]>
  ];
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getNumDevices() const {
      return getDp() * getSp() * getTp() * getPp();
    }
  }];
}

def RLHF_CostAttr : RLHF_Attr<"Cost", "cost"> {
  let summary = "predicted time and peak memory of an op";
  let description = [{
    Set by the cost-estimation pass: seconds and bytes per device.

    ```mlir
    #rlhf.cost<time = 1.25, memory = 3.2e+10>
    ```
  }];
  let parameters = (ins APFloatParameter<"">:$time, APFloatParameter<"">:$memory);
  let assemblyFormat = "`<` struct(params) `>`";
}

#endif // RLHF_ATTRS_TD
