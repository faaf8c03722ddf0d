// RUN: rlhf-opt %s --split-input-file --verify-diagnostics
// One failing case per verifier rule of the rlhf dialect.

// symbol references to models resolve
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{'nope' does not name an rlhf.model}}
  %g = rlhf.generate @nope(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// the algorithm's cluster resolves
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
// expected-error @+1 {{'nowhere' does not name an rlhf.cluster}}
rlhf.algorithm @a cluster @nowhere steps 1 seed 1 save_interval 0 {
}

// -----

// a load's dataset resolves and matches its type (but for its rows: dynamic
// sampling's gen_batch draws more)
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %ok = rlhf.load @d : !rlhf.record<prompt: tensor<48x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{differs from the batch type of @d, '!rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>', in more than its rows}}
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<32x9xi32, #rlhf.kind<tokens>>>
}

// -----

// dp*tp*pp equals the mesh size
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{strategy dp*tp*pp = 2*4*1 = 8 does not match the 16 devices of its mesh}}
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 on <0, 16> as <dp = 2, tp = 4, pp = 1, mbs = 1> : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// a mesh comes with a strategy
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{needs both a mesh and a strategy}}
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 on <0, 16> : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// tp stays within a node
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{tensor-parallel group of 4 GPUs starting at GPU 6 spans two nodes}}
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 on <6, 4> as <dp = 1, tp = 4, pp = 1, mbs = 1> : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// a mesh fits in the cluster
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{mesh <8, 16> exceeds the 16 GPUs of cluster @c}}
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 on <8, 16> as <dp = 16, tp = 1, pp = 1, mbs = 1> : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// generate needs an lm head
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{cannot generate with @critic: it has a value head}}
  %g = rlhf.generate @critic(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// generate reads token ids
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
  %lp = rlhf.field %g["logprobs"] : !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
  // expected-error @+1 {{prompt must hold tokens}}
  %h = rlhf.generate @actor(%lp) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 : tensor<16x8xf32, #rlhf.kind<logprobs>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// inference reads token ids
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
  %lp = rlhf.field %g["logprobs"] : !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
  // expected-error @+1 {{input must hold tokens}}
  %r = rlhf.inference @ref(%lp) : tensor<16x8xf32, #rlhf.kind<logprobs>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// inference results match the model's head
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
  %s = rlhf.field %g["seq"] : !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
  // expected-error @+1 {{result of @critic must have a 'values' field}}
  %r = rlhf.inference @critic(%s) : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// train_step targets only trainable models
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{cannot train @ref: it is not trainable}}
  %t = rlhf.train_step @ref fn "sft_loss"(%p) minibatches 1 epochs 1 settings {} body {
  ^bb0(%fn_tok: tensor<?x?xi32>):
    %fn_lp = rlhf.model_output logprobs %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_nll = arith.negf %fn_lp : tensor<?x?xf32>
    %fn_m = rlhf.mask_of %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_l = rlhf.reduce token mean %fn_nll, %fn_m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %fn_l : f64
  } : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
}

// -----

// a loss trains a model with the right head
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{loss 'sft_loss' needs a model with a lm head, but @critic has a value head}}
  %t = rlhf.train_step @critic fn "sft_loss"(%p) minibatches 1 epochs 1 settings {} body {
  ^bb0(%fn_tok: tensor<?x?xi32>):
    %fn_lp = rlhf.model_output logprobs %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_nll = arith.negf %fn_lp : tensor<?x?xf32>
    %fn_m = rlhf.mask_of %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_l = rlhf.reduce token mean %fn_nll, %fn_m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %fn_l : f64
  } : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
}

// -----

// a C++ host function gets the inputs it needs
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{'exact_match' takes 2 inputs, got 1}}
  %m = rlhf.compute exact_match(%p) {} : (tensor<16x8xi32, #rlhf.kind<tokens>>) -> !rlhf.record<score: tensor<16xf32, #rlhf.kind<score>>>
}

// -----

// minibatches divide the batch
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{batch of 16 does not split into 3 minibatches}}
  %t = rlhf.train_step @actor fn "sft_loss"(%p) minibatches 3 epochs 1 settings {} body {
  ^bb0(%fn_tok: tensor<?x?xi32>):
    %fn_lp = rlhf.model_output logprobs %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_nll = arith.negf %fn_lp : tensor<?x?xf32>
    %fn_m = rlhf.mask_of %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_l = rlhf.reduce token mean %fn_nll, %fn_m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %fn_l : f64
  } : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
}

// -----

// host functions get inputs of the right kind
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{input #1 of 'exact_match' must hold answer, but holds tokens}}
  %m = rlhf.compute exact_match(%p, %p) {} : (tensor<16x8xi32, #rlhf.kind<tokens>>, tensor<16x8xi32, #rlhf.kind<tokens>>) -> !rlhf.record<score: tensor<16xf32, #rlhf.kind<score>>>
}

// -----

// record fields that are used exist
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{record has no field 'answer'}}
  %x = rlhf.field %b["answer"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
}

// -----

// a record names each field once
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
// expected-error @+1 {{record field 'seq' appears twice}}
rlhf.dataset @dup "d.jsonl" : !rlhf.record<seq: tensor<4xi32, #rlhf.kind<tokens>>, seq: tensor<4xi32, #rlhf.kind<tokens>>>

// -----

// record fields are kinded tensors
// expected-error @+1 {{record field 'x' must be a tensor with a #rlhf.kind encoding}}
rlhf.dataset @plain "d.jsonl" : !rlhf.record<x: tensor<4xi32>>

// -----

// a realloc moves layouts of the same model
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{source @actor and target @big are not layouts of the same model}}
  rlhf.realloc @actor on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> to @big on <0, 8> as <dp = 1, tp = 8, pp = 1, mbs = 1>
}

// -----

// a realloc changes the layout
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{moves @actor to the layout it already has}}
  rlhf.realloc @actor on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> to @actor on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1>
}

// -----

// a realloc's layouts fill their meshes
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{target layout: strategy dp*tp*pp = 1*4*1 = 4 does not match the 8 devices of its mesh}}
  rlhf.realloc @actor on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> to @actor on <0, 8> as <dp = 1, tp = 4, pp = 1, mbs = 1>
}

// -----

// a transfer moves between different layouts
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{moves a tensor to the layout it is already in}}
  %q = rlhf.transfer %p from <0, 8> dp 2 to <0, 8> dp 2 : tensor<16x8xi32, #rlhf.kind<tokens>>
}

// -----

// a transfer's dp divides its mesh
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{dp 3 does not divide the 8 GPUs of its mesh}}
  %q = rlhf.transfer %p from <0, 8> dp 3 to <8, 8> dp 1 : tensor<16x8xi32, #rlhf.kind<tokens>>
}

// -----

// ema averages distinct models
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{cannot average a model into itself}}
  rlhf.ema @actor from @actor decay 0.99
}

// -----

// ema averages models of one architecture
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{@big and @ref have different architectures}}
  rlhf.ema @ref from @big decay 0.99
}

// -----

// optimizer settings only on trainable models
// expected-error @+1 {{has optimizer settings but is not trainable}}
rlhf.model @m <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm optimizer <kind = "adam", lr = 1.0e-6, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.0, grad_clip = 1.0>

// -----

// learning-rate schedules are constant, linear or cosine
// expected-error @+1 {{unknown schedule 'step'; supported: constant, linear, cosine}}
rlhf.model @m <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable optimizer <kind = "adam", lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.0, grad_clip = 1.0, schedule = "step">

// -----

// a schedule decays from lr down to min_lr
// expected-error @+1 {{min_lr must not exceed lr}}
rlhf.model @m <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable optimizer <kind = "adam", lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.0, grad_clip = 1.0, schedule = "cosine", min_lr = 1.0e-2>

// -----

// warmup counts iterations
// expected-error @+1 {{warmup_steps and decay_steps must be between 0 and 1099511627776}}
rlhf.model @m <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable optimizer <kind = "adam", lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.0, grad_clip = 1.0, warmup_steps = -1>

// -----

// optimizers are adam or adamw
// expected-error @+1 {{unknown optimizer 'sgd'; supported: adam, adamw}}
rlhf.model @m <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable optimizer <kind = "sgd", lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.0, grad_clip = 1.0>

// -----

// Adam's betas are below 1
// expected-error @+1 {{beta1 and beta2 must be below 1}}
rlhf.model @m <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable optimizer <kind = "adam", lr = 1.0e-3, beta1 = 1.0, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.0, grad_clip = 1.0>

// -----

// architecture sizes are consistent
// expected-error @+1 {{hidden size 100 is not divisible by 3 heads}}
rlhf.model @m <name = "x", layers = 1, hidden = 100, heads = 3, kv_heads = 3, ffn = 8, vocab = 8, max_seq = 8, tie_embeddings = false> head lm

// -----

// strategies are positive
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
rlhf.model @big <name = "llama2_13b", layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{dp, tp, pp, mbs and sp must be positive}}
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 on <0, 8> as <dp = 0, tp = 8, pp = 1, mbs = 1> : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// clusters have GPUs
// expected-error @+1 {{nodes is 0; it must be 1 to 65536}}
rlhf.cluster @empty nodes 0 gpus_per_node 8 hardware <name = "x", bf16_flops = 1.0, hbm = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 1.0, network_bandwidth = 1.0>

// -----

// hardware rates are positive
// expected-error @+1 {{hardware rates and sizes must be positive}}
rlhf.cluster @slow nodes 1 gpus_per_node 8 hardware <name = "x", bf16_flops = 0.0, hbm = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 1.0, network_bandwidth = 1.0>

// -----

// only frozen models are offloaded
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10, host_bandwidth = 6.4e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{offloads @actor, which is trainable; only frozen models rest in host memory}}
  %l = rlhf.inference @actor(%p) on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1, offload = true> : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// an offloaded model has one call
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10, host_bandwidth = 6.4e10>
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
// expected-error @+1 {{offloads @ref, which has 2 calls; only a model with one call can rest in host memory}}
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %l = rlhf.inference @ref(%p) on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1, offload = true> : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
  %m = rlhf.inference @ref(%p) on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// onload and offload carry an offloaded layout
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10, host_bandwidth = 6.4e10>
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  // expected-error @+1 {{needs a strategy with offload = true}}
  rlhf.onload @ref on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1>
}

// -----

// a generate lags at most its algorithm's staleness
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 staleness 1 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{may lag 2 versions, but its algorithm's staleness is 1}}
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 stale 2 : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// a synchronous algorithm's generates lag no version
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{may lag 1 versions, but its algorithm's staleness is 0}}
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 stale 1 : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
}

// -----

// a weight update lags at most the algorithm's staleness
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 staleness 1 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{lets the generator lag 2 versions, but its algorithm's staleness is 1}}
  rlhf.weight_update @actor version_lag 2 on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> to @actor on <8, 8> as <dp = 2, tp = 4, pp = 1, mbs = 1>
}

// -----

// a weight update lags at least one version
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 staleness 1 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{version_lag is 0; it must be 1 to 64}}
  rlhf.weight_update @actor version_lag 0 on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> to @actor on <8, 8> as <dp = 2, tp = 4, pp = 1, mbs = 1>
}

// -----

// a weight update changes the layout
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 staleness 1 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{copies @actor into the layout it already has; a generator in the trainer's layout needs no update}}
  rlhf.weight_update @actor version_lag 1 on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> to @actor on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 4>
}

// -----

// a weight update copies a trained model
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 staleness 1 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{updates from @ref, which is not trainable; its weights never change}}
  rlhf.weight_update @ref version_lag 1 on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> to @ref on <8, 8> as <dp = 2, tp = 4, pp = 1, mbs = 1>
}

// -----

// filter_groups keeps whole groups
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %m = rlhf.compute exact_match(%p, %p) {} : (tensor<16x8xi32, #rlhf.kind<tokens>>, tensor<16x8xi32, #rlhf.kind<tokens>>) -> !rlhf.record<score: tensor<12xf32, #rlhf.kind<score>>>
  %s = rlhf.field %m["score"] : !rlhf.record<score: tensor<12xf32, #rlhf.kind<score>>>
  // expected-error @+1 {{groups its 12 scores 8 at a time, which does not divide them}}
  %k:1 = rlhf.filter_groups %s group 8 rounds 4 min_std 0.0 expect 1.0 keep (%b) : tensor<12xf32, #rlhf.kind<score>>, !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
}

// -----

// filter_groups keeps rows per prompt or per sample
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %m = rlhf.compute exact_match(%p, %p) {} : (tensor<16x8xi32, #rlhf.kind<tokens>>, tensor<16x8xi32, #rlhf.kind<tokens>>) -> !rlhf.record<score: tensor<64xf32, #rlhf.kind<score>>>
  %s = rlhf.field %m["score"] : !rlhf.record<score: tensor<64xf32, #rlhf.kind<score>>>
  // expected-error @+1 {{keeps rows per prompt (8) or per sample (64), but a value has 16}}
  %k:1 = rlhf.filter_groups %s group 8 rounds 4 min_std 0.0 expect 1.0 keep (%b) : tensor<64xf32, #rlhf.kind<score>>, !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
}

// -----

// filter_groups expects at most max_rounds rounds
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %m = rlhf.compute exact_match(%p, %p) {} : (tensor<16x8xi32, #rlhf.kind<tokens>>, tensor<16x8xi32, #rlhf.kind<tokens>>) -> !rlhf.record<score: tensor<32xf32, #rlhf.kind<score>>>
  %s = rlhf.field %m["score"] : !rlhf.record<score: tensor<32xf32, #rlhf.kind<score>>>
  // expected-error @+1 {{expects 5 rounds, outside [1, max_rounds = 4]}}
  %k:1 = rlhf.filter_groups %s group 2 rounds 4 min_std 0.0 expect 5.0 keep (%b) : tensor<32xf32, #rlhf.kind<score>>, !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
}

// -----

// filter_groups keeps no more prompts than max_rounds rounds draw
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %m = rlhf.compute exact_match(%p, %p) {} : (tensor<16x8xi32, #rlhf.kind<tokens>>, tensor<16x8xi32, #rlhf.kind<tokens>>) -> !rlhf.record<score: tensor<32xf32, #rlhf.kind<score>>>
  %s = rlhf.field %m["score"] : !rlhf.record<score: tensor<32xf32, #rlhf.kind<score>>>
  // expected-error @+1 {{keeps 80 prompts, more than 4 rounds of 16 draw}}
  %k:1 = rlhf.filter_groups %s group 2 prompts 80 rounds 4 min_std 0.0 expect 1.0 keep (%b) : tensor<32xf32, #rlhf.kind<score>>, !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
}

// -----

// an eval interval needs an eval dataset
rlhf.cluster @c nodes 1 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>, answer: tensor<16x2xi32, #rlhf.kind<answer>>>
// expected-error @+1 {{'rlhf.algorithm' op has an eval_interval but no eval dataset}}
rlhf.algorithm @a cluster @c steps 10 seed 1 save_interval 0 attributes {eval_interval = 5 : i64} {
}

// -----

// eval samples need an eval dataset, and are at least one
rlhf.cluster @c nodes 1 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
// expected-error @+1 {{'rlhf.algorithm' op has eval samples but no eval dataset}}
rlhf.algorithm @a cluster @c steps 10 seed 1 save_interval 0 samples 4 {
}

// -----

rlhf.cluster @c nodes 1 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
// expected-error @+1 {{'rlhf.algorithm' op eval_samples is 0}}
rlhf.algorithm @a cluster @c steps 10 seed 1 save_interval 0 eval @d every 5 samples 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
}

// -----

// the eval dataset resolves
rlhf.cluster @c nodes 1 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>, answer: tensor<16x2xi32, #rlhf.kind<answer>>>
// expected-error @+1 {{'rlhf.algorithm' op eval 'nowhere' does not name an rlhf.dataset}}
rlhf.algorithm @a cluster @c steps 10 seed 1 save_interval 0 eval @nowhere every 5 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>, answer: tensor<16x2xi32, #rlhf.kind<answer>>>
}

// -----

// an eval batch's samples fit in the rows the plan prices a generate for
rlhf.cluster @c nodes 1 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
rlhf.dataset @held "h.jsonl" : !rlhf.record<prompt: tensor<8x8xi32, #rlhf.kind<tokens>>>
// expected-error @+1 {{'rlhf.algorithm' op draws 8 samples of each of the 8 prompts of an @held batch, more than the 32 rows the plan prices generate @actor for}}
rlhf.algorithm @a cluster @c steps 10 seed 1 save_interval 0 eval @held every 5 samples 8 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 2 temperature 1.0 top_p 1.0 : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<32x12xi32, #rlhf.kind<tokens>>, logprobs: tensor<32x12xf32, #rlhf.kind<logprobs>>>
}

// -----

// evaluation replaces a load
rlhf.cluster @c nodes 1 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>, answer: tensor<16x2xi32, #rlhf.kind<answer>>>
// expected-error @+1 {{'rlhf.algorithm' op evaluates on @d in place of the dataset the iteration loads, but it loads none}}
rlhf.algorithm @a cluster @c steps 10 seed 1 save_interval 0 eval @d every 5 {
}

// -----

// the eval dataset has every field of the loaded one
rlhf.cluster @c nodes 1 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>, answer: tensor<16x2xi32, #rlhf.kind<answer>>>
rlhf.dataset @held "held.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
// expected-error @+1 {{'rlhf.algorithm' op eval dataset @held lacks field 'answer' as 'tensor<16x2xi32, #rlhf.kind<answer>>' of @d}}
rlhf.algorithm @a cluster @c steps 10 seed 1 save_interval 0 eval @held every 5 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>, answer: tensor<16x2xi32, #rlhf.kind<answer>>>
}

// -----

// none of the eval dataset's fields is wider, nor its batch larger
rlhf.cluster @c nodes 1 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>, answer: tensor<16x2xi32, #rlhf.kind<answer>>>
rlhf.dataset @held "held.jsonl" : !rlhf.record<prompt: tensor<16x9xi32, #rlhf.kind<tokens>>, answer: tensor<16x2xi32, #rlhf.kind<answer>>>
// expected-error @+1 {{'rlhf.algorithm' op eval dataset @held's field 'prompt' ('tensor<16x9xi32, #rlhf.kind<tokens>>') exceeds @d's ('tensor<16x8xi32, #rlhf.kind<tokens>>'), which the plan is priced for}}
rlhf.algorithm @a cluster @c steps 10 seed 1 save_interval 0 eval @held every 5 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>, answer: tensor<16x2xi32, #rlhf.kind<answer>>>
}
