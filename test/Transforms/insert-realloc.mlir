// RUN: rlhf-opt %s --rlhf-insert-realloc | FileCheck %s
// RUN: rlhf-opt %s --rlhf-insert-realloc > %t.once
// RUN: rlhf-opt %t.once --rlhf-insert-realloc > %t.twice
// RUN: diff %t.once %t.twice
// A realloc appears exactly where a model's parameter layout changes: the
// trained actor moves from its train layout (carried in from the previous
// iteration) to its generation layout, stays there for its inference, and
// moves back for training. The frozen ref never moves, and a change of
// micro-batches alone moves nothing.
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>

// CHECK-LABEL: rlhf.algorithm @a
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>
  // CHECK:      rlhf.realloc @actor on <0, 16> as <dp = 16, tp = 1, pp = 1, mbs = 1> to @actor on <0, 16> as <dp = 2, tp = 8, pp = 1, mbs = 1> cost
  // CHECK-NEXT: rlhf.generate @actor
  %g = rlhf.generate @actor(%p) max_new_tokens 128 n 1 temperature 1.0 top_p 1.0 on <0, 16> as <dp = 2, tp = 8, pp = 1, mbs = 1> : tensor<64x128xi32, #rlhf.kind<tokens>> -> !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  %s = rlhf.field %g["seq"] : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  // CHECK-NOT:  rlhf.realloc
  // CHECK:      rlhf.inference @actor
  %l = rlhf.inference @actor(%s) on <0, 16> as <dp = 2, tp = 8, pp = 1, mbs = 4> : tensor<64x256xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>>
  // CHECK-NOT:  rlhf.realloc
  // CHECK:      rlhf.inference @ref
  %r = rlhf.inference @ref(%s) on <0, 16> as <dp = 16, tp = 1, pp = 1, mbs = 1> : tensor<64x256xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>>
  %lp = rlhf.field %l["logprobs"] : !rlhf.record<seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>>
  // CHECK-NEXT: rlhf.field
  // CHECK-NEXT: rlhf.realloc @actor on <0, 16> as <dp = 2, tp = 8, pp = 1, mbs = 1> to @actor on <0, 16> as <dp = 16, tp = 1, pp = 1, mbs = 1> cost
  // CHECK-NEXT: rlhf.train_step @actor
  %t = rlhf.train_step @actor fn "sft_loss"(%s) minibatches 4 epochs 1 settings {} on <0, 16> as <dp = 16, tp = 1, pp = 1, mbs = 1> body {
  ^bb0(%fn_tok: tensor<?x?xi32>):
    %fn_lp = rlhf.model_output logprobs %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_nll = arith.negf %fn_lp : tensor<?x?xf32>
    %fn_m = rlhf.mask_of %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_l = rlhf.reduce token mean %fn_nll, %fn_m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %fn_l : f64
  } : tensor<64x256xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
  // CHECK-NOT:  rlhf.realloc
  // CHECK:      }
}
