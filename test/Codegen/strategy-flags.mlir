// RUN: rlhf-opt %s --rlhf-lower-to-runtime | FileCheck %s
// A train call's strategy flags reach the runtime in its settings string:
// ZeRO slices Adam's moments over dp, recompute replays layers in backward.
rlhf.cluster @c nodes 1 gpus_per_node 4 hardware <name = "cpu", bf16_flops = 2.0e11, hbm = 4.0e9, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 5.0e9, network_bandwidth = 1.0e9>
rlhf.model @actor <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 2, ffn = 176, vocab = 16, max_seq = 32, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<text: tensor<8x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<text: tensor<8x8xi32, #rlhf.kind<tokens>>>
  %t = rlhf.field %b["text"] : !rlhf.record<text: tensor<8x8xi32, #rlhf.kind<tokens>>>
  %s = rlhf.train_step @actor fn "sft_loss"(%t) minibatches 1 epochs 1 settings {} on <0, 4> as <dp = 4, tp = 1, pp = 1, mbs = 1, zero = true, recompute = true> body {
  ^bb0(%fn_tok: tensor<?x?xi32>):
    %fn_lp = rlhf.model_output logprobs %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_nll = arith.negf %fn_lp : tensor<?x?xf32>
    %fn_m = rlhf.mask_of %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_l = rlhf.reduce token mean %fn_nll, %fn_m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %fn_l : f64
  } : tensor<8x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
}

// CHECK: llvm.mlir.global internal constant @[[S:.*]]("recompute=1,zero=1\00")
// CHECK: llvm.mlir.addressof @[[S]]
// CHECK: llvm.call @rlhf_train(
