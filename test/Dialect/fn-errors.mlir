// RUN: rlhf-opt %s --split-input-file --verify-diagnostics
// One failing case per verifier rule of function bodies (RLHFFnOps.td).

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  // expected-error @+1 {{of kind 'fn' needs the function's name}}
  %r = rlhf.compute fn(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    rlhf.yield %x : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
  return
}

// -----

func.func @f(%t: tensor<8x6xi32, #rlhf.kind<tokens>>, %a: tensor<4x2xi32, #rlhf.kind<answer>>) {
  // expected-error @+1 {{has a function name or body, but its kind is not 'fn'}}
  %r = rlhf.compute exact_match "g"(%t, %a) {} : (tensor<8x6xi32, #rlhf.kind<tokens>>, tensor<4x2xi32, #rlhf.kind<answer>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
  return
}

// -----

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  // expected-error @+1 {{body argument #0 must be 'tensor<?xf32>'}}
  %r = rlhf.compute fn "g"(%s) {} body {
  ^bb0(%x: tensor<?x?xf32>):
    rlhf.yield %x : tensor<?x?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
  return
}

// -----

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "g"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    // expected-error @+1 {{yields 2 values for 1 result fields}}
    rlhf.yield %x, %x : tensor<?xf32>, tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
  return
}

// -----

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "g"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    // expected-error @+1 {{over batch takes a per-sequence value, unmasked, to a scalar}}
    %m = rlhf.reduce batch mean %x : tensor<?xf32> -> tensor<?xf32>
    rlhf.yield %m : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
  return
}

// -----

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "g"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    // expected-error @+1 {{over groups needs a group size of at least 1}}
    %m = rlhf.reduce group mean %x : tensor<?xf32> -> tensor<?xf32>
    rlhf.yield %m : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
  return
}

// -----

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "g"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    // expected-error @+1 {{has a group size but does not reduce over groups}}
    %m = rlhf.reduce batch sum %x {group = 4 : i64} : tensor<?xf32> -> f64
    %b = rlhf.splat %m like %x : tensor<?xf32>
    rlhf.yield %b : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
  return
}

// -----

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "g"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    %c = arith.constant 1.0 : f64
    // expected-error @+1 {{splats a scalar like a tensor, not like 'f64'}}
    %b = rlhf.splat %c like %c : f64
    rlhf.yield %x : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
  return
}

// -----

func.func @f(%t: tensor<8x16xi32, #rlhf.kind<tokens>>) {
  %r = rlhf.compute fn "g"(%t) {} body {
  ^bb0(%x: tensor<?x?xi32>):
    // expected-error @+1 {{belongs in the body of an rlhf.train_step}}
    %lp = rlhf.model_output logprobs %x : tensor<?x?xi32> -> tensor<?x?xf32>
    rlhf.yield %lp : tensor<?x?xf32>
  } : (tensor<8x16xi32, #rlhf.kind<tokens>>) -> !rlhf.record<logprobs: tensor<8x16xf32, #rlhf.kind<logprobs>>>
  return
}

// -----

func.func @f(%l: tensor<8x16xf32, #rlhf.kind<logprobs>>) {
  %r = rlhf.compute fn "g"(%l) {} body {
  ^bb0(%x: tensor<?x?xf32>):
    %e = math.exp %x : tensor<?x?xf32>
    // expected-error @+1 {{operand is an argument of the body}}
    %m = rlhf.mask_of %e : tensor<?x?xf32> -> tensor<?x?xf32>
    rlhf.yield %m : tensor<?x?xf32>
  } : (tensor<8x16xf32, #rlhf.kind<logprobs>>) -> !rlhf.record<mask: tensor<8x16xf32, #rlhf.kind<mask>>>
  return
}

// -----

rlhf.model @actor <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 128, vocab = 256, max_seq = 64, tie_embeddings = false> head lm trainable
func.func @f(%t: tensor<8x16xi32, #rlhf.kind<tokens>>) {
  // expected-error @+1 {{loss 'l' reads no output of the trained model}}
  %s = rlhf.train_step @actor fn "l"(%t) minibatches 1 epochs 1 settings {} body {
  ^bb0(%x: tensor<?x?xi32>):
    %c = arith.constant 1.0 : f64
    rlhf.yield %c : f64
  } : tensor<8x16xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
  return
}

// -----

rlhf.model @actor <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 128, vocab = 256, max_seq = 64, tie_embeddings = false> head lm trainable
func.func @f(%t: tensor<8x16xi32, #rlhf.kind<tokens>>) {
  // expected-error @+1 {{loss 'l' reads outputs of an lm head and of a value head}}
  %s = rlhf.train_step @actor fn "l"(%t) minibatches 1 epochs 1 settings {} body {
  ^bb0(%x: tensor<?x?xi32>):
    %m = rlhf.mask_of %x : tensor<?x?xi32> -> tensor<?x?xf32>
    %lp = rlhf.model_output logprobs %x : tensor<?x?xi32> -> tensor<?x?xf32>
    %v = rlhf.model_output values %x : tensor<?x?xi32> -> tensor<?x?xf32>
    %a = arith.addf %lp, %v : tensor<?x?xf32>
    %r = rlhf.reduce token mean %a, %m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %r : f64
  } : tensor<8x16xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
  return
}

// -----

rlhf.model @critic <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 128, vocab = 256, max_seq = 64, tie_embeddings = false> head value trainable
func.func @f(%t: tensor<8x16xi32, #rlhf.kind<tokens>>) {
  // expected-error @+1 {{loss 'l' needs a model with a lm head, but @critic has a value head}}
  %s = rlhf.train_step @critic fn "l"(%t) minibatches 1 epochs 1 settings {} body {
  ^bb0(%x: tensor<?x?xi32>):
    %m = rlhf.mask_of %x : tensor<?x?xi32> -> tensor<?x?xf32>
    %lp = rlhf.model_output logprobs %x : tensor<?x?xi32> -> tensor<?x?xf32>
    %r = rlhf.reduce token mean %lp, %m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %r : f64
  } : tensor<8x16xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
  return
}

// -----

rlhf.model @actor <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 128, vocab = 256, max_seq = 64, tie_embeddings = false> head lm trainable
func.func @f(%t: tensor<8x16xi32, #rlhf.kind<tokens>>) {
  %s = rlhf.train_step @actor fn "l"(%t) minibatches 1 epochs 1 settings {} body {
  ^bb0(%x: tensor<?x?xi32>):
    %lp = rlhf.model_output logprobs %x : tensor<?x?xi32> -> tensor<?x?xf32>
    // expected-error @+1 {{of a loss yields f64 scalars: the loss, then one per metric of its stats record}}
    rlhf.yield %lp : tensor<?x?xf32>
  } : tensor<8x16xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
  return
}

// -----

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "g"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    // expected-error @+1 {{adapts to the KL its call measures, but the call has no number result 'kl'}}
    %beta = rlhf.adaptive_kl init 5.000000e-02 target 1.000000e-01 horizon 1.000000e+04
    %b = rlhf.splat %beta like %x : tensor<?xf32>
    %o = arith.mulf %b, %x : tensor<?xf32>
    rlhf.yield %o : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
  return
}

// -----

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "g"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    // expected-error @+1 {{needs init and target above 0 and a horizon of at least 1}}
    %beta = rlhf.adaptive_kl init 5.000000e-02 target 0.000000e+00 horizon 1.000000e+04
    %k = rlhf.reduce batch mean %x : tensor<?xf32> -> f64
    %b = rlhf.splat %beta like %x : tensor<?xf32>
    %o = arith.mulf %b, %x : tensor<?xf32>
    rlhf.yield %o, %k : tensor<?xf32>, f64
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>, kl: tensor<f32, #rlhf.kind<number>>>
  return
}

// -----

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "g"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    %a = rlhf.adaptive_kl init 5.000000e-02 target 1.000000e-01 horizon 1.000000e+04
    // expected-error @+1 {{is the second in this body; a call adapts one KL coefficient}}
    %c = rlhf.adaptive_kl init 1.000000e-01 target 1.000000e-01 horizon 1.000000e+04
    %k = rlhf.reduce batch mean %x : tensor<?xf32> -> f64
    %s2 = arith.addf %a, %c : f64
    %b = rlhf.splat %s2 like %x : tensor<?xf32>
    %o = arith.mulf %b, %x : tensor<?xf32>
    rlhf.yield %o, %k : tensor<?xf32>, f64
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>, kl: tensor<f32, #rlhf.kind<number>>>
  return
}

// -----

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "g"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    // expected-error @+1 {{adapts to the entropy its call measures, but the call has no number result 'entropy'}}
    %e = rlhf.adaptive_entropy init 0.000000e+00 target 2.000000e-01 delta 1.000000e-04 max 5.000000e-03 min 0.000000e+00
    %k = rlhf.reduce batch mean %x : tensor<?xf32> -> f64
    %b = rlhf.splat %e like %x : tensor<?xf32>
    %o = arith.mulf %b, %x : tensor<?xf32>
    rlhf.yield %o, %k : tensor<?xf32>, f64
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>, kl: tensor<f32, #rlhf.kind<number>>>
  return
}

// -----

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "g"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    // expected-error @+1 {{needs a target and a delta above 0 and 0 <= min <= init <= max}}
    %e = rlhf.adaptive_entropy init 1.000000e-02 target 2.000000e-01 delta 1.000000e-04 max 5.000000e-03 min 0.000000e+00
    %k = rlhf.reduce batch mean %x : tensor<?xf32> -> f64
    %b = rlhf.splat %e like %x : tensor<?xf32>
    %o = arith.mulf %b, %x : tensor<?xf32>
    rlhf.yield %o, %k : tensor<?xf32>, f64
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>, entropy: tensor<f32, #rlhf.kind<number>>>
  return
}

// -----

func.func @f(%s: tensor<8xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "g"(%s) {} body {
  ^bb0(%x: tensor<?xf32>):
    // expected-error @+1 {{keeps a mean or a standard deviation, not a var}}
    %v = rlhf.running_moment var %x : tensor<?xf32> -> f64
    %b = rlhf.splat %v like %x : tensor<?xf32>
    rlhf.yield %b : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
  return
}

// -----

rlhf.model @actor <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 128, vocab = 256, max_seq = 64, tie_embeddings = false> head lm trainable
func.func @f(%t: tensor<8x16xi32, #rlhf.kind<tokens>>, %a: tensor<8xf32, #rlhf.kind<advantages>>) {
  %s = rlhf.train_step @actor fn "l"(%t, %a) minibatches 1 epochs 1 settings {} body {
  ^bb0(%x: tensor<?x?xi32>, %y: tensor<?xf32>):
    // expected-error @+1 {{keeps statistics across calls, so it belongs in the body of an rlhf.compute (a host function), not a loss}}
    %sd = rlhf.running_moment std %y : tensor<?xf32> -> f64
    %lp = rlhf.model_output logprobs %x : tensor<?x?xi32> -> tensor<?x?xf32>
    %m = rlhf.mask_of %x : tensor<?x?xi32> -> tensor<?x?xf32>
    %l = rlhf.reduce token mean %lp, %m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    %o = arith.mulf %l, %sd : f64
    rlhf.yield %o : f64
  } : tensor<8x16xi32, #rlhf.kind<tokens>>, tensor<8xf32, #rlhf.kind<advantages>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
  return
}

// -----

rlhf.model @actor <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 4, ffn = 128, vocab = 256, max_seq = 64, tie_embeddings = false> head lm trainable
func.func @f(%t: tensor<8x16xi32, #rlhf.kind<tokens>>) {
  %s = rlhf.train_step @actor fn "l"(%t) minibatches 1 epochs 1 settings {} body {
  ^bb0(%x: tensor<?x?xi32>):
    %m = rlhf.mask_of %x : tensor<?x?xi32> -> tensor<?x?xf32>
    %lp = rlhf.model_output logprobs %x : tensor<?x?xi32> -> tensor<?x?xf32>
    // expected-error @+1 {{takes the max over the batch's tokens, which a loss, run once per micro-batch, does not see whole; compute it in a host function}}
    %r = rlhf.reduce token max %lp, %m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %r : f64
  } : tensor<8x16xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
  return
}
