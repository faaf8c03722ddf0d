// RUN: rlhf-opt %s --split-input-file --verify-diagnostics
// Sequence parallelism in the strategy: sp multiplies into the mesh size,
// prints only when above 1, and generation keeps sp = 1.

rlhf.cluster @c nodes 1 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama3_8b", layers = 32, hidden = 4096, heads = 32, kv_heads = 8, ffn = 14336, vocab = 128256, max_seq = 8192, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{generates with sp = 2; generation runs with sp = 1 (its decode steps have one token per sequence to split)}}
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 on <0, 8> as <dp = 4, tp = 1, pp = 1, mbs = 1, sp = 2> : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>, seq: tensor<16x12xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x12xf32, #rlhf.kind<logprobs>>, mask: tensor<16x12xi8, #rlhf.kind<mask>>>
}

// -----

rlhf.cluster @c nodes 1 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @ref <name = "llama3_8b", layers = 32, hidden = 4096, heads = 32, kv_heads = 8, ffn = 14336, vocab = 128256, max_seq = 8192, tie_embeddings = false> head lm
rlhf.dataset @d "d.jsonl" : !rlhf.record<text: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<text: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %t = rlhf.field %b["text"] : !rlhf.record<text: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{strategy dp*tp*pp*sp = 2*1*1*2 = 4 does not match the 8 devices of its mesh}}
  %r = rlhf.inference @ref(%t) on <0, 8> as <dp = 2, tp = 1, pp = 1, mbs = 1, sp = 2> : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// expected-error @+1 {{dp, tp, pp, mbs and sp must be positive}}
func.func private @f() attributes {s = #rlhf.strategy<dp = 1, tp = 1, pp = 1, mbs = 1, sp = 0>}
