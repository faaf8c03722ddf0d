// RUN: rlhf-opt %s | rlhf-opt | FileCheck %s
// Every op, type and attribute of the dialect prints and parses back.

// CHECK: rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.890000e+14, hbm = 8.000000e+10, hbm_bandwidth = 3.350000e+12, nvlink_bandwidth = 4.500000e+11, network_bandwidth = 5.000000e+10>
rlhf.cluster @c nodes 2 gpus_per_node 8 hardware <name = "H100_SXM", bf16_flops = 9.89e14, hbm = 8.0e10, hbm_bandwidth = 3.35e12, nvlink_bandwidth = 4.5e11, network_bandwidth = 5.0e10>

// CHECK: rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable optimizer <kind = "adam", lr = {{.*}}, beta1 = 9.000000e-01, beta2 = {{.*}}, eps = 1.000000e-08, weight_decay = 0.000000e+00, grad_clip = 1.000000e+00> checkpoint "ckpt/actor"
rlhf.model @actor <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable optimizer <kind = "adam", lr = 1.0e-6, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.0, grad_clip = 1.0> checkpoint "ckpt/actor"
// CHECK: rlhf.model @scheduled {{.*}} optimizer <kind = "adamw", lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = {{.*}}, eps = 1.000000e-08, weight_decay = 0.000000e+00, grad_clip = 1.000000e+00, schedule = "cosine", warmup_steps = 10, decay_steps = 100, min_lr = 1.000000e-04>{{$}}
rlhf.model @scheduled <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm trainable optimizer <kind = "adamw", lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.0, grad_clip = 1.0, schedule = "cosine", warmup_steps = 10, decay_steps = 100, min_lr = 1.0e-4>
// CHECK: rlhf.model @critic {{.*}} head value trainable
rlhf.model @critic <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head value trainable
// CHECK: rlhf.model @ref <name = "llama2_7b", {{.*}}> head lm{{$}}
rlhf.model @ref <name = "llama2_7b", layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, max_seq = 4096, tie_embeddings = false> head lm
// CHECK: rlhf.model @small <name = "qwen2_5_0_5b", {{.*}} tie_embeddings = true> head lm
rlhf.model @small <name = "qwen2_5_0_5b", layers = 24, hidden = 896, heads = 14, kv_heads = 2, ffn = 4864, vocab = 151936, max_seq = 32768, tie_embeddings = true> head lm

// CHECK: rlhf.dataset @prompts "p.jsonl" : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
rlhf.dataset @prompts "p.jsonl" : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>

// CHECK-LABEL: rlhf.algorithm @all cluster @c steps 3 seed 7 save_interval 1 {
rlhf.algorithm @all cluster @c steps 3 seed 7 save_interval 1 {
  // CHECK: %[[B:.*]] = rlhf.load @prompts
  %b = rlhf.load @prompts : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  // CHECK: %[[P:.*]] = rlhf.field %[[B]]["prompt"]
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %a = rlhf.field %b["answer"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  // CHECK: %[[G:.*]] = rlhf.generate @actor(%[[P]]) max_new_tokens 4 n 2 temperature {{.*}} top_p 9.000000e-01 greedy on <0, 16> as <dp = 2, tp = 8, pp = 1, mbs = 1> pinned cost <time = 1.500000e+00, memory = 2.000000e+10>
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 2 temperature 0.7 top_p 0.9 greedy on <0, 16> as <dp = 2, tp = 8, pp = 1, mbs = 1> pinned cost <time = 1.5, memory = 2.0e10> : tensor<8x4xi32, #rlhf.kind<tokens>> -> !rlhf.record<prompt: tensor<16x4xi32, #rlhf.kind<tokens>>, seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>, mask: tensor<16x8xi8, #rlhf.kind<mask>>>
  %seq = rlhf.field %g["seq"] : !rlhf.record<prompt: tensor<16x4xi32, #rlhf.kind<tokens>>, seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>, mask: tensor<16x8xi8, #rlhf.kind<mask>>>
  %lp = rlhf.field %g["logprobs"] : !rlhf.record<prompt: tensor<16x4xi32, #rlhf.kind<tokens>>, seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>, mask: tensor<16x8xi8, #rlhf.kind<mask>>>
  // CHECK: rlhf.inference @critic(%{{.*}}) on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 2, zero = true, recompute = true> :
  %v = rlhf.inference @critic(%seq) on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 2, zero = true, recompute = true> : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, values: tensor<16x8xf32, #rlhf.kind<values>>, score: tensor<16xf32, #rlhf.kind<score>>>
  %r = rlhf.inference @ref(%seq) : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
  %rlp = rlhf.field %r["logprobs"] : !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
  // CHECK: rlhf.compute exact_match(%{{.*}}, %{{.*}}) {} :
  %m = rlhf.compute exact_match(%seq, %a) {} : (tensor<16x8xi32, #rlhf.kind<tokens>>, tensor<8x2xi32, #rlhf.kind<answer>>) -> !rlhf.record<score: tensor<16xf32, #rlhf.kind<score>>>
  %s = rlhf.field %m["score"] : !rlhf.record<score: tensor<16xf32, #rlhf.kind<score>>>
  // CHECK: %{{.*}}:2 = rlhf.filter_groups %{{.*}} group 2 rounds 4 min_std 0.000000e+00 expect 1.500000e+00 keep(%[[B]], %[[G]]) : tensor<16xf32, #rlhf.kind<score>>, !rlhf.record<prompt: tensor<8x4xi32
  %kept:2 = rlhf.filter_groups %s group 2 rounds 4 min_std 0.0 expect 1.5 keep (%b, %g) : tensor<16xf32, #rlhf.kind<score>>, !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>, !rlhf.record<prompt: tensor<16x4xi32, #rlhf.kind<tokens>>, seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>, mask: tensor<16x8xi8, #rlhf.kind<mask>>>
  // A round of 8 prompts keeping 4 (gen_batch beside the batch): the kept
  // rows are 4 prompts' and 8 samples'.
  // CHECK: %{{.*}}:2 = rlhf.filter_groups %{{.*}} group 2 prompts 4 rounds 4 min_std 0.000000e+00 expect 1.000000e+00 keep(%[[B]], %[[G]]) : tensor<16xf32, #rlhf.kind<score>>, !rlhf.record<prompt: tensor<8x4xi32
  %fewer:2 = rlhf.filter_groups %s group 2 prompts 4 rounds 4 min_std 0.0 expect 1.0 keep (%b, %g) : tensor<16xf32, #rlhf.kind<score>>, !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>, !rlhf.record<prompt: tensor<16x4xi32, #rlhf.kind<tokens>>, seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>, mask: tensor<16x8xi8, #rlhf.kind<mask>>>
  // max_rounds times the draw past 2^64 is no overflow to a bound below
  // the prompts kept.
  // CHECK: rlhf.filter_groups %{{.*}} group 2 prompts 4 rounds 4611686018427387904
  %many:2 = rlhf.filter_groups %s group 2 prompts 4 rounds 4611686018427387904 min_std 0.0 expect 1.0 keep (%b, %g) : tensor<16xf32, #rlhf.kind<score>>, !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>, !rlhf.record<prompt: tensor<16x4xi32, #rlhf.kind<tokens>>, seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>, mask: tensor<16x8xi8, #rlhf.kind<mask>>>
  %fewerSeq = rlhf.field %fewer#1["seq"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, seq: tensor<8x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<8x8xf32, #rlhf.kind<logprobs>>, mask: tensor<8x8xi8, #rlhf.kind<mask>>>
  %fewerAns = rlhf.field %fewer#0["answer"] : !rlhf.record<prompt: tensor<4x4xi32, #rlhf.kind<tokens>>, answer: tensor<4x2xi32, #rlhf.kind<answer>>>
  // CHECK: rlhf.compute fn "grpo_adv"(%{{.*}}) {} body {
  // CHECK: rlhf.reduce group mean %{{.*}} {group = 2 : i64}
  %adv = rlhf.compute fn "grpo_adv"(%s) {} body {
  ^bb0(%fn_x: tensor<?xf32>):
    %fn_mean = rlhf.reduce group mean %fn_x {group = 2 : i64} : tensor<?xf32> -> tensor<?xf32>
    %fn_a = arith.subf %fn_x, %fn_mean : tensor<?xf32>
    rlhf.yield %fn_a : tensor<?xf32>
  } : (tensor<16xf32, #rlhf.kind<score>>) -> !rlhf.record<advantages: tensor<16xf32, #rlhf.kind<advantages>>>
  %ad = rlhf.field %adv["advantages"] : !rlhf.record<advantages: tensor<16xf32, #rlhf.kind<advantages>>>
  // CHECK: rlhf.train_step @actor fn "grpo_loss"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) minibatches 1 epochs 1 settings {} on <0, 16> as <dp = 16, tp = 1, pp = 1, mbs = 1> body {
  // CHECK: rlhf.model_output logprobs
  // CHECK: } : tensor<16x8xi32, #rlhf.kind<tokens>>, tensor<16x8xf32, #rlhf.kind<logprobs>>, tensor<16xf32, #rlhf.kind<advantages>>, tensor<16x8xf32, #rlhf.kind<logprobs>> -> <loss: tensor<f32, #rlhf.kind<loss>>, kl: tensor<f32, #rlhf.kind<number>>>
  %st = rlhf.train_step @actor fn "grpo_loss"(%seq, %lp, %ad, %rlp) minibatches 1 epochs 1 settings {} on <0, 16> as <dp = 16, tp = 1, pp = 1, mbs = 1> body {
  ^bb0(%fn_t: tensor<?x?xi32>, %fn_old: tensor<?x?xf32>, %fn_adv1: tensor<?xf32>, %fn_ref: tensor<?x?xf32>):
    %fn_new = rlhf.model_output logprobs %fn_t : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_m = rlhf.mask_of %fn_t : tensor<?x?xi32> -> tensor<?x?xf32>
    %fn_a = rlhf.broadcast %fn_adv1 like %fn_new : tensor<?xf32> -> tensor<?x?xf32>
    %fn_d = arith.subf %fn_new, %fn_old : tensor<?x?xf32>
    %fn_ratio = math.exp %fn_d : tensor<?x?xf32>
    %fn_gain = arith.mulf %fn_ratio, %fn_a : tensor<?x?xf32>
    %fn_neg = arith.negf %fn_gain : tensor<?x?xf32>
    %fn_l = rlhf.reduce token mean %fn_neg, %fn_m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    %fn_k = arith.subf %fn_ref, %fn_new : tensor<?x?xf32>
    %fn_kl = rlhf.reduce token mean %fn_k, %fn_m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %fn_l, %fn_kl : f64, f64
  } : tensor<16x8xi32, #rlhf.kind<tokens>>, tensor<16x8xf32, #rlhf.kind<logprobs>>, tensor<16xf32, #rlhf.kind<advantages>>, tensor<16x8xf32, #rlhf.kind<logprobs>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>, kl: tensor<f32, #rlhf.kind<number>>>
  // CHECK: rlhf.ema @ref from @actor decay {{0.99[45]}}
  rlhf.ema @ref from @actor decay 0.995
  // CHECK: rlhf.realloc @actor on <0, 16> as <dp = 16, tp = 1, pp = 1, mbs = 1> to @actor on <0, 16> as <dp = 2, tp = 8, pp = 1, mbs = 1> cost <time = 2.500000e-01, memory = 0.000000e+00>
  rlhf.realloc @actor on <0, 16> as <dp = 16, tp = 1, pp = 1, mbs = 1> to @actor on <0, 16> as <dp = 2, tp = 8, pp = 1, mbs = 1> cost <time = 0.25, memory = 0.0>
  // CHECK: rlhf.transfer %{{.*}} from <0, 8> dp 1 to <8, 8> dp 8 : tensor<16x8xf32, #rlhf.kind<values>>
  %vals = rlhf.field %v["values"] : !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, values: tensor<16x8xf32, #rlhf.kind<values>>, score: tensor<16xf32, #rlhf.kind<score>>>
  %moved = rlhf.transfer %vals from <0, 8> dp 1 to <8, 8> dp 8 : tensor<16x8xf32, #rlhf.kind<values>>
}

// Staleness: the algorithm's bound, a generate's lag and the versioned
// weight update into the generator's own layout.
rlhf.dataset @d16 "d.jsonl" : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
// CHECK-LABEL: rlhf.algorithm @async
// CHECK-SAME: staleness 2
rlhf.algorithm @async cluster @c steps 1 seed 1 save_interval 0 staleness 2 {
  %b = rlhf.load @d16 : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
  // CHECK: rlhf.generate @actor(%{{.*}}) max_new_tokens 4 n 1 temperature 1.000000e+00 top_p 1.000000e+00 stale 2 on <8, 8>
  %g = rlhf.generate @actor(%p) max_new_tokens 4 n 1 temperature 1.0 top_p 1.0 stale 2 on <8, 8> as <dp = 2, tp = 4, pp = 1, mbs = 1> : tensor<16x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x8xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x8xf32, #rlhf.kind<logprobs>>>
  // CHECK: rlhf.weight_update @actor version_lag 2 on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> to @actor on <8, 8> as <dp = 2, tp = 4, pp = 1, mbs = 1> cost <time = 2.500000e-01, memory = 0.000000e+00>
  rlhf.weight_update @actor version_lag 2 on <0, 8> as <dp = 8, tp = 1, pp = 1, mbs = 1> to @actor on <8, 8> as <dp = 2, tp = 4, pp = 1, mbs = 1> cost <time = 0.25, memory = 0.0>
}

// Held-out evaluation on a dataset like the one loaded, narrower and in
// smaller batches.
rlhf.dataset @held "held.jsonl" : !rlhf.record<prompt: tensor<8x6xi32, #rlhf.kind<tokens>>>
// CHECK-LABEL: rlhf.algorithm @evaluated
// CHECK-SAME: eval @held every 10 {
rlhf.algorithm @evaluated cluster @c steps 100 seed 1 save_interval 0 eval @held every 10 {
  %b = rlhf.load @d16 : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
}
// Two samples of each held-out prompt.
// CHECK-LABEL: rlhf.algorithm @sampled
// CHECK-SAME: eval @held every 10 samples 2 {
rlhf.algorithm @sampled cluster @c steps 100 seed 1 save_interval 0 eval @held every 10 samples 2 {
  %b = rlhf.load @d16 : !rlhf.record<prompt: tensor<16x8xi32, #rlhf.kind<tokens>>>
}
