// RUN: rlhf-opt %s --split-input-file --rlhf-insert-realloc --rlhf-lower-to-runtime --verify-diagnostics
// A generator that runs ahead samples later iterations' prompts, so they
// must come straight from a dataset column, and a model has one.

rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>

rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 staleness 1 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>
  %g = rlhf.generate @actor(%p) max_new_tokens 128 n 1 temperature 1.0 top_p 1.0 stale 1 on <8, 8> as <dp = 2, tp = 4, pp = 1, mbs = 1> : tensor<64x128xi32, #rlhf.kind<tokens>> -> !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  %q = rlhf.field %g["prompt"] : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  // expected-error @below {{a generate that runs ahead (staleness 1) samples later iterations' prompts, so they must be a dataset column}}
  %g2 = rlhf.generate @actor(%q) max_new_tokens 128 n 1 temperature 1.0 top_p 1.0 stale 1 on <8, 8> as <dp = 2, tp = 4, pp = 1, mbs = 1> : tensor<64x128xi32, #rlhf.kind<tokens>> -> !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  %s = rlhf.field %g2["seq"] : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  %t = rlhf.train_step @actor fn "sft_loss"(%s) minibatches 4 epochs 1 settings {} on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> body {
  ^bb0(%fn_tok: tensor<?x?xi32>):
    %fn_lp = rlhf.model_output logprobs %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_nll = arith.negf %fn_lp : tensor<?x?xf32>
    %fn_m = rlhf.mask_of %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_l = rlhf.reduce token mean %fn_nll, %fn_m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %fn_l : f64
  } : tensor<64x256xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
}

// -----

rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>

rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 staleness 1 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>
  // expected-note @below {{its first generate}}
  %g = rlhf.generate @actor(%p) max_new_tokens 128 n 1 temperature 1.0 top_p 1.0 stale 1 on <8, 8> as <dp = 2, tp = 4, pp = 1, mbs = 1> : tensor<64x128xi32, #rlhf.kind<tokens>> -> !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  // expected-error @below {{@actor has one generator that runs ahead, but this is its second generate in the iteration}}
  %g2 = rlhf.generate @actor(%p) max_new_tokens 128 n 1 temperature 1.0 top_p 1.0 stale 1 on <8, 8> as <dp = 2, tp = 4, pp = 1, mbs = 1> : tensor<64x128xi32, #rlhf.kind<tokens>> -> !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  %s = rlhf.field %g2["seq"] : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  %t = rlhf.train_step @actor fn "sft_loss"(%s) minibatches 4 epochs 1 settings {} on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> body {
  ^bb0(%fn_tok: tensor<?x?xi32>):
    %fn_lp = rlhf.model_output logprobs %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_nll = arith.negf %fn_lp : tensor<?x?xf32>
    %fn_m = rlhf.mask_of %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_l = rlhf.reduce token mean %fn_nll, %fn_m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %fn_l : f64
  } : tensor<64x256xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
}
