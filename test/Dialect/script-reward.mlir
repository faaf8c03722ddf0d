// RUN: rlhf-opt %s --split-input-file --verify-diagnostics | FileCheck %s
// script_reward: its string command prints and parses back; the verifier
// checks its inputs and settings.

// the command is a string among numbers
rlhf.cluster @c nodes 1 gpus_per_node 4 hardware <name = "cpu", bf16_flops = 2.0e11, hbm = 4.0e9, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 5.0e9, network_bandwidth = 1.0e9>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %a = rlhf.field %b["answer"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  // CHECK: rlhf.compute script_reward(%{{.*}}, %{{.*}}) {command = "python3 verify.py --tag \22a,b\22", default = 0.000000e+00 : f64, timeout = 3.000000e+01 : f64, workers = 4.000000e+00 : f64} :
  %r = rlhf.compute script_reward(%p, %a) {command = "python3 verify.py --tag \"a,b\"", default = 0.0 : f64, timeout = 30.0 : f64, workers = 4.0 : f64} : (tensor<8x4xi32, #rlhf.kind<tokens>>, tensor<8x2xi32, #rlhf.kind<answer>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
}

// -----

// a command is a non-empty string
rlhf.cluster @c nodes 1 gpus_per_node 4 hardware <name = "cpu", bf16_flops = 2.0e11, hbm = 4.0e9, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 5.0e9, network_bandwidth = 1.0e9>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %a = rlhf.field %b["answer"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  // expected-error @+1 {{'rlhf.compute' op 'command' of script_reward must be a non-empty string}}
  %r = rlhf.compute script_reward(%p, %a) {command = 3.0 : f64} : (tensor<8x4xi32, #rlhf.kind<tokens>>, tensor<8x2xi32, #rlhf.kind<answer>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
}

// -----

// an empty command
rlhf.cluster @c nodes 1 gpus_per_node 4 hardware <name = "cpu", bf16_flops = 2.0e11, hbm = 4.0e9, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 5.0e9, network_bandwidth = 1.0e9>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %a = rlhf.field %b["answer"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  // expected-error @+1 {{'rlhf.compute' op 'command' of script_reward must be a non-empty string}}
  %r = rlhf.compute script_reward(%p, %a) {command = ""} : (tensor<8x4xi32, #rlhf.kind<tokens>>, tensor<8x2xi32, #rlhf.kind<answer>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
}

// -----

// at least one worker
rlhf.cluster @c nodes 1 gpus_per_node 4 hardware <name = "cpu", bf16_flops = 2.0e11, hbm = 4.0e9, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 5.0e9, network_bandwidth = 1.0e9>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %a = rlhf.field %b["answer"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  // expected-error @+1 {{'rlhf.compute' op 'workers' of script_reward must be at least 1}}
  %r = rlhf.compute script_reward(%p, %a) {command = "v", workers = 0.0 : f64} : (tensor<8x4xi32, #rlhf.kind<tokens>>, tensor<8x2xi32, #rlhf.kind<answer>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
}

// -----

// a positive timeout
rlhf.cluster @c nodes 1 gpus_per_node 4 hardware <name = "cpu", bf16_flops = 2.0e11, hbm = 4.0e9, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 5.0e9, network_bandwidth = 1.0e9>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %a = rlhf.field %b["answer"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  // expected-error @+1 {{'rlhf.compute' op 'timeout' of script_reward must be positive}}
  %r = rlhf.compute script_reward(%p, %a) {command = "v", timeout = 0.0 : f64} : (tensor<8x4xi32, #rlhf.kind<tokens>>, tensor<8x2xi32, #rlhf.kind<answer>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
}

// -----

// the inputs are sequences and answers
rlhf.cluster @c nodes 1 gpus_per_node 4 hardware <name = "cpu", bf16_flops = 2.0e11, hbm = 4.0e9, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 5.0e9, network_bandwidth = 1.0e9>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %a = rlhf.field %b["answer"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  // expected-error @+1 {{'rlhf.compute' op input #0 of 'script_reward' must hold tokens, but holds answer}}
  %r = rlhf.compute script_reward(%a, %a) {command = "v"} : (tensor<8x2xi32, #rlhf.kind<answer>>, tensor<8x2xi32, #rlhf.kind<answer>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
}
