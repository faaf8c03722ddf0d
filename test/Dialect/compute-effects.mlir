// RUN: rlhf-opt %s --cse --canonicalize | FileCheck %s
// Host functions are pure, so CSE merges two identical ones and drops an
// unused one; script_reward runs the user's programs, so both of its calls
// stay even when one is unused.

// CHECK-LABEL: func.func @effects
func.func @effects(%s: tensor<8xf32, #rlhf.kind<score>>, %t: tensor<8x6xi32, #rlhf.kind<tokens>>, %a: tensor<4x2xi32, #rlhf.kind<answer>>) -> (!rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>, !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>) {
  // CHECK: %[[ADV:.*]] = rlhf.compute fn "grpo_adv"
  // CHECK-NOT: rlhf.compute fn
  %0 = rlhf.compute fn "grpo_adv"(%s) {} body {
  ^bb0(%fn_x: tensor<?xf32>):
    %fn_mean = rlhf.reduce group mean %fn_x {group = 2 : i64} : tensor<?xf32> -> tensor<?xf32>
    %fn_a = arith.subf %fn_x, %fn_mean : tensor<?xf32>
    rlhf.yield %fn_a : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
  %1 = rlhf.compute fn "grpo_adv"(%s) {} body {
  ^bb0(%fn_x: tensor<?xf32>):
    %fn_mean = rlhf.reduce group mean %fn_x {group = 2 : i64} : tensor<?xf32> -> tensor<?xf32>
    %fn_a = arith.subf %fn_x, %fn_mean : tensor<?xf32>
    rlhf.yield %fn_a : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
  %2 = rlhf.compute fn "grpo_adv"(%s) {} body {
  ^bb0(%fn_x: tensor<?xf32>):
    %fn_mean = rlhf.reduce group mean %fn_x {group = 4 : i64} : tensor<?xf32> -> tensor<?xf32>
    %fn_a = arith.subf %fn_x, %fn_mean : tensor<?xf32>
    rlhf.yield %fn_a : tensor<?xf32>
  } : (tensor<8xf32, #rlhf.kind<score>>) -> !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
  // CHECK-COUNT-2: rlhf.compute script_reward
  %3 = rlhf.compute script_reward(%t, %a) {command = "python3 v.py", timeout = 3.0e+01 : f64, workers = 4.0 : f64} : (tensor<8x6xi32, #rlhf.kind<tokens>>, tensor<4x2xi32, #rlhf.kind<answer>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
  %4 = rlhf.compute script_reward(%t, %a) {command = "python3 v.py", timeout = 3.0e+01 : f64, workers = 4.0 : f64} : (tensor<8x6xi32, #rlhf.kind<tokens>>, tensor<4x2xi32, #rlhf.kind<answer>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
  // CHECK-NOT: rlhf.compute
  // CHECK: return %[[ADV]], %[[ADV]] :
  return %0, %1 : !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>, !rlhf.record<advantages: tensor<8xf32, #rlhf.kind<advantages>>>
}
