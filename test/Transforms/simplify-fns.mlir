// RUN: rlhf-opt %s --rlhf-simplify-fns | FileCheck %s
// Function bodies fold constants, share subexpressions and lose dead code;
// ops outside them stay.

rlhf.model @actor <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 128, vocab = 256, max_seq = 64, tie_embeddings = false> head lm trainable

// CHECK-LABEL: func.func @host
func.func @host(%s: tensor<8xf32, #rlhf.kind<score>>) {
  // CHECK: rlhf.compute fn "shift"
  // CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<?xf32>):
  // The number parameter (1 + 0.2) folds to one constant.
  // CHECK-NEXT: %[[C:.*]] = arith.constant 1.200000e+00 : f64
  // The two exp(x) are one.
  // CHECK-NEXT: %[[E:.*]] = math.exp %[[X]] : tensor<?xf32>
  // CHECK-NEXT: %[[A:.*]] = arith.addf %[[E]], %[[E]] : tensor<?xf32>
  // CHECK-NEXT: %[[B:.*]] = rlhf.splat %[[C]] like %[[A]]
  // CHECK-NEXT: %[[R:.*]] = arith.mulf %[[A]], %[[B]]
  // The unused log is gone.
  // CHECK-NOT: math.log
  // CHECK-NEXT: rlhf.yield %[[R]] : tensor<?xf32>
  %r = rlhf.compute fn "shift"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    %one = arith.constant 1.0 : f64
    %clip = arith.constant 0.2 : f64
    %k = arith.addf %one, %clip : f64
    %e1 = math.exp %x : tensor<?xf32>
    %e2 = math.exp %x : tensor<?xf32>
    %dead = math.log %x : tensor<?xf32>
    %a = arith.addf %e1, %e2 : tensor<?xf32>
    %b = rlhf.splat %k like %a : tensor<?xf32>
    %y = arith.mulf %a, %b : tensor<?xf32>
    rlhf.yield %y : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
  return
}

// CHECK-LABEL: func.func @loss
func.func @loss(%t: tensor<8x16xi32, #rlhf.kind<tokens>>) {
  // Two reads of the model's logprobs are one forward pass.
  // CHECK: rlhf.train_step @actor fn "l"
  // CHECK-COUNT-1: rlhf.model_output logprobs
  // CHECK-NOT: rlhf.model_output
  // CHECK: rlhf.yield
  %s = rlhf.train_step @actor fn "l"(%t) minibatches 1 epochs 1 settings {} body {
  ^bb0(%x: tensor<?x?xi32>):
    %m = rlhf.mask_of %x : tensor<?x?xi32> -> tensor<?x?xf32>
    %lp1 = rlhf.model_output logprobs %x : tensor<?x?xi32> -> tensor<?x?xf32>
    %lp2 = rlhf.model_output logprobs %x : tensor<?x?xi32> -> tensor<?x?xf32>
    %a = arith.addf %lp1, %lp2 : tensor<?x?xf32>
    %r = rlhf.reduce token mean %a, %m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %r : f64
  } : tensor<8x16xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
  // Outside function bodies nothing changes: the unused constant stays.
  // CHECK: arith.constant 3.000000e+00 : f64
  %unused = arith.constant 3.0 : f64
  return
}
