// RUN: rlhf-opt %s --rlhf-insert-realloc --rlhf-lower-to-runtime --verify-diagnostics
// The runtime has no generator that runs ahead yet: lowering an
// asynchronous plan stops at its weight update with a located error.
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>

rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 staleness 1 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>
  %g = rlhf.generate @actor(%p) max_new_tokens 128 n 1 temperature 1.0 top_p 1.0 stale 1 on <8, 8> as <dp = 2, tp = 4, pp = 1, mbs = 1> : tensor<64x128xi32, #rlhf.kind<tokens>> -> !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  %s = rlhf.field %g["seq"] : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  %t = rlhf.train_step @actor fn "sft_loss"(%s) minibatches 4 epochs 1 settings {} on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> body {
  ^bb0(%fn_tok: tensor<?x?xi32>):
    %fn_lp = rlhf.model_output logprobs %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_nll = arith.negf %fn_lp : tensor<?x?xf32>
    %fn_m = rlhf.mask_of %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_l = rlhf.reduce token mean %fn_nll, %fn_m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %fn_l : f64
  } : tensor<64x256xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
  // expected-error @-8 {{asynchronous execution (staleness 1) is not implemented in the runtime yet: it cannot run the weight update of @actor into a generator that runs ahead}}
}
