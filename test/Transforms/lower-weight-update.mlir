// RUN: rlhf-opt %s --rlhf-insert-realloc --rlhf-lower-to-runtime | FileCheck %s
// An asynchronous plan lowers to a generator that runs ahead: its generate
// names the dataset column and the iteration (it samples later iterations'
// prompts), and after the last train the weight update lets it sample
// ahead and then copies the trainer's weights into its layout.
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
}

// CHECK-DAG: llvm.mlir.global internal constant @[[PROMPT:__rlhf_str[0-9]+]]("prompt\00")
// The model starts in the trainer's layout {0, 8, 1, 1, 1}, not the
// generator's.
// CHECK-LABEL: llvm.mlir.global internal constant @__rlhf_actor_layout()
// CHECK-NEXT: llvm.mlir.undef
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.insertvalue
// CHECK-NEXT: llvm.mlir.constant(8 : i64)
// CHECK-LABEL: func.func private @__rlhf_iteration_a(
// CHECK-SAME: %[[P:[a-z0-9]+]]: !llvm.ptr, %[[STEP:[a-z0-9]+]]: i64
// CHECK: llvm.call @rlhf_field(
// CHECK: %[[FIELD:[0-9]+]] = llvm.mlir.addressof @[[PROMPT]]
// CHECK-NEXT: %[[LAYOUT:[0-9]+]] = llvm.mlir.addressof @__rlhf_actor_generate
// CHECK: llvm.call @rlhf_generate_stale(%[[P]], %{{.*}}, %{{.*}}, %[[FIELD]], %[[STEP]], %[[LAYOUT]], {{.*}}) : (!llvm.ptr, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, i64, f64, f64, i64, i64, !llvm.ptr) -> !llvm.ptr
// CHECK-NOT: @rlhf_generate(
// CHECK: llvm.call @rlhf_train(
// CHECK: llvm.call @rlhf_weight_update(%[[P]], {{.*}}) : (!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64) -> ()
// CHECK-NEXT: return
