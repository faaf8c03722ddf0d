// RUN: rlhf-opt %s --rlhf-assign-placement | FileCheck %s
// RUN: rlhf-opt %s --rlhf-assign-placement=planner=heuristic | FileCheck %s
// RUN: not rlhf-opt %s --rlhf-assign-placement=planner=manual 2>&1 | FileCheck %s --check-prefix=MANUAL
// RUN: not rlhf-opt %s --rlhf-assign-placement=planner=bogus 2>&1 | FileCheck %s --check-prefix=BOGUS
// RUN: not rlhf-opt %s --rlhf-assign-placement=budget=0 2>&1 | FileCheck %s --check-prefix=BUDGET
// The planner never moves a pinned call, and places every other one.
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>

rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>>
  // CHECK: rlhf.generate @actor{{.*}} on <4, 2> as <dp = 1, tp = 2, pp = 1, mbs = 1> pinned
  %g = rlhf.generate @actor(%p) max_new_tokens 128 n 1 temperature 1.0 top_p 1.0 on <4, 2> as <dp = 1, tp = 2, pp = 1, mbs = 1> pinned : tensor<64x128xi32, #rlhf.kind<tokens>> -> !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  %s = rlhf.field %g["seq"] : !rlhf.record<prompt: tensor<64x128xi32, #rlhf.kind<tokens>>, seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>, mask: tensor<64x256xi8, #rlhf.kind<mask>>>
  // CHECK: rlhf.inference @ref({{.*}}) on <{{[0-9]+}}, {{[0-9]+}}> as <dp =
  // MANUAL: error: planner=manual needs a placement on every model call
  %r = rlhf.inference @ref(%s) : tensor<64x256xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<64x256xi32, #rlhf.kind<tokens>>, logprobs: tensor<64x256xf32, #rlhf.kind<logprobs>>>
  // CHECK: rlhf.train_step @actor{{.*}} on <{{[0-9]+}}, {{[0-9]+}}> as <dp =
  %t = rlhf.train_step @actor fn "sft_loss"(%s) minibatches 1 epochs 1 settings {} body {
  ^bb0(%fn_tok: tensor<?x?xi32>):
    %fn_lp = rlhf.model_output logprobs %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_nll = arith.negf %fn_lp : tensor<?x?xf32>
    %fn_m = rlhf.mask_of %fn_tok : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_l = rlhf.reduce token mean %fn_nll, %fn_m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %fn_l : f64
  } : tensor<64x256xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
}
// BOGUS: error: unknown planner 'bogus'; use search, heuristic, colocated, separated or manual
// BUDGET: error: the search budget must be at least 1, got 0; pass --search-budget=N with N >= 1 (default 200000)
