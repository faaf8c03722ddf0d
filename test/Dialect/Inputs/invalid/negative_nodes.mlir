rlhf.cluster @c nodes -1 gpus_per_node 4 hardware <name = "cpu", bf16_flops = 2.0e11, hbm = 4.0e9, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 5.0e9, network_bandwidth = 1.0e9>
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %a = rlhf.field %b["answer"] : !rlhf.record<prompt: tensor<8x4xi32, #rlhf.kind<tokens>>, answer: tensor<8x2xi32, #rlhf.kind<answer>>>
  %r = rlhf.compute exact_match(%p, %a) {} : (tensor<8x4xi32, #rlhf.kind<tokens>>, tensor<8x2xi32, #rlhf.kind<answer>>) -> !rlhf.record<score: tensor<8xf32, #rlhf.kind<score>>>
}
