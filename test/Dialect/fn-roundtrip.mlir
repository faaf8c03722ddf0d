// RUN: rlhf-opt %s | rlhf-opt | FileCheck %s
// Every op of function bodies prints and parses back.

rlhf.model @actor <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 128, vocab = 256, max_seq = 64, tie_embeddings = false> head lm trainable

// CHECK-LABEL: func.func @ops
func.func @ops(%s: tensor<8xf32, #rlhf.kind<score>>, %l: tensor<8x16xf32, #rlhf.kind<logprobs>>, %t: tensor<8x16xi32, #rlhf.kind<tokens>>) {
  // CHECK: rlhf.compute fn "all"(%{{.*}}, %{{.*}}, %{{.*}}) {} body {
  %r = rlhf.compute fn "all"(%s, %l, %t) {} body {
  ^bb0(%x: tensor<?xf32>, %y: tensor<?x?xf32>, %tok: tensor<?x?xi32>):
    %c = arith.constant 0.5 : f64
    // CHECK: rlhf.mask_of %{{.*}} : tensor<?x?xi32> -> tensor<?x?xf32>
    %m = rlhf.mask_of %tok : tensor<?x?xi32> -> tensor<?x?xf32>
    // CHECK: rlhf.mask_of %{{.*}} : tensor<?x?xf32> -> tensor<?x?xf32>
    %m2 = rlhf.mask_of %y : tensor<?x?xf32> -> tensor<?x?xf32>
    // CHECK: rlhf.broadcast %{{.*}} like %{{.*}} : tensor<?xf32> -> tensor<?x?xf32>
    %b = rlhf.broadcast %x like %y : tensor<?xf32> -> tensor<?x?xf32>
    // CHECK: rlhf.splat %{{.*}} like %{{.*}} : tensor<?x?xf32>
    %cs = rlhf.splat %c like %y : tensor<?x?xf32>
    // CHECK: rlhf.sigmoid %{{.*}} : tensor<?x?xf32>
    %sg = rlhf.sigmoid %y : tensor<?x?xf32>
    // CHECK: rlhf.softplus %{{.*}} : tensor<?x?xf32>
    %sp = rlhf.softplus %sg : tensor<?x?xf32>
    // CHECK: rlhf.stop_gradient %{{.*}} : tensor<?x?xf32>
    %st = rlhf.stop_gradient %sp : tensor<?x?xf32>
    // CHECK: rlhf.clamp %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x?xf32>
    %cl = rlhf.clamp %st, %cs, %b : tensor<?x?xf32>
    // CHECK: rlhf.last %{{.*}} : tensor<?x?xf32>
    %la = rlhf.last %m : tensor<?x?xf32>
    // CHECK: rlhf.next %{{.*}} : tensor<?x?xf32>
    %nx = rlhf.next %cl : tensor<?x?xf32>
    // CHECK: rlhf.discounted_cumsum %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x?xf32>
    %dc = rlhf.discounted_cumsum %nx, %c, %m : tensor<?x?xf32>
    // CHECK: rlhf.reduce seq mean %{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?x?xf32> -> tensor<?xf32>
    %sm = rlhf.reduce seq mean %dc, %m2 : tensor<?x?xf32>, tensor<?x?xf32> -> tensor<?xf32>
    // CHECK: rlhf.reduce group std %{{.*}} {correction = 0 : i64, group = 4 : i64} : tensor<?xf32> -> tensor<?xf32>
    %gs = rlhf.reduce group std %sm {group = 4 : i64, correction = 0 : i64} : tensor<?xf32> -> tensor<?xf32>
    // CHECK: rlhf.reduce token var %{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    %tv = rlhf.reduce token var %la, %m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    // CHECK: rlhf.reduce seq max %{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?x?xf32> -> tensor<?xf32>
    %sx = rlhf.reduce seq max %dc, %m2 : tensor<?x?xf32>, tensor<?x?xf32> -> tensor<?xf32>
    // CHECK: rlhf.reduce group min %{{.*}} {group = 4 : i64} : tensor<?xf32> -> tensor<?xf32>
    %gn = rlhf.reduce group min %sx {group = 4 : i64} : tensor<?xf32> -> tensor<?xf32>
    // CHECK: rlhf.reduce token max %{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    %tx = rlhf.reduce token max %la, %m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    // CHECK: rlhf.yield %{{.*}} : tensor<?xf32>
    rlhf.yield %gs : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>, tensor<8x16xf32, #rlhf.kind<logprobs>>, tensor<8x16xi32, #rlhf.kind<tokens>>) -> !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
  // CHECK: rlhf.train_step @actor fn "l"(%{{.*}}) minibatches 2 epochs 1 settings {} body {
  %st = rlhf.train_step @actor fn "l"(%t) minibatches 2 epochs 1 settings {} body {
  ^bb0(%x: tensor<?x?xi32>):
    %m = rlhf.mask_of %x : tensor<?x?xi32> -> tensor<?x?xf32>
    // CHECK: rlhf.model_output entropy %{{.*}} : tensor<?x?xi32> -> tensor<?x?xf32>
    %e = rlhf.model_output entropy %x : tensor<?x?xi32> -> tensor<?x?xf32>
    %lr = rlhf.reduce token mean %e, %m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %lr : f64
  } : tensor<8x16xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
  return
}

// A coefficient the run adapts, in a host function whose call measures
// `kl`.
// CHECK-LABEL: func.func @adaptive
func.func @adaptive(%s: tensor<8xf32, #rlhf.kind<score>>, %l: tensor<8x16xf32, #rlhf.kind<logprobs>>) {
  %r = rlhf.compute fn "shaped"(%s, %l) {} body {
  ^bb0(%x: tensor<?xf32>, %y: tensor<?x?xf32>):
    // CHECK: %[[B:.*]] = rlhf.adaptive_kl init 5.000000e-02 target 1.000000e-01 horizon 1.000000e+04
    %beta = rlhf.adaptive_kl init 5.000000e-02 target 1.000000e-01 horizon 1.000000e+04
    // CHECK: rlhf.splat %[[B]] like
    %b = rlhf.splat %beta like %x : tensor<?xf32>
    %o = arith.mulf %b, %x : tensor<?xf32>
    %m = rlhf.mask_of %y : tensor<?x?xf32> -> tensor<?x?xf32>
    %kl = rlhf.reduce token mean %y, %m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %o, %kl : tensor<?xf32>, f64
  } : (tensor<8xf32, #rlhf.kind<score>>, tensor<8x16xf32, #rlhf.kind<logprobs>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>, kl: tensor<f32, #rlhf.kind<number>>>
  return
}

// An entropy coefficient the run adapts, beside a KL one, in a function
// whose call measures both.
// CHECK-LABEL: func.func @adaptive_entropy
func.func @adaptive_entropy(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "shaped"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    // CHECK: rlhf.adaptive_entropy init 0.000000e+00 target 2.000000e-01 delta 1.000000e-04 max 5.000000e-03 min 0.000000e+00
    %e = rlhf.adaptive_entropy init 0.000000e+00 target 2.000000e-01 delta 1.000000e-04 max 5.000000e-03 min 0.000000e+00
    %beta = rlhf.adaptive_kl init 5.000000e-02 target 1.000000e-01 horizon 1.000000e+04
    %c = arith.addf %e, %beta : f64
    %b = rlhf.splat %c like %x : tensor<?xf32>
    %o = arith.mulf %b, %x : tensor<?xf32>
    %k = rlhf.reduce batch mean %x : tensor<?xf32> -> f64
    rlhf.yield %o, %k, %k : tensor<?xf32>, f64, f64
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>, kl: tensor<f32, #rlhf.kind<number>>, entropy: tensor<f32, #rlhf.kind<number>>>
  return
}

// Statistics a host function keeps across calls.
// CHECK-LABEL: func.func @running
func.func @running(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "scaled"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    // CHECK: rlhf.running_moment mean %{{.*}} : tensor<?xf32> -> f64
    %m = rlhf.running_moment mean %x : tensor<?xf32> -> f64
    // CHECK: rlhf.running_moment std %{{.*}} : tensor<?xf32> -> f64
    %sd = rlhf.running_moment std %x : tensor<?xf32> -> f64
    %ms = rlhf.splat %m like %x : tensor<?xf32>
    %ss = rlhf.splat %sd like %x : tensor<?xf32>
    %c = arith.subf %x, %ms : tensor<?xf32>
    %o = arith.divf %c, %ss : tensor<?xf32>
    rlhf.yield %o : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
  return
}
