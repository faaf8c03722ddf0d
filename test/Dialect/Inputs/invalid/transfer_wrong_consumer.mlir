rlhf.cluster @c nodes 1 gpus_per_node 4 hardware <name = "cpu", bf16_flops = 2.0e11, hbm = 4.0e9, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 5.0e9, network_bandwidth = 1.0e9>
rlhf.model @actor <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 2, ffn = 176, vocab = 16, max_seq = 32, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 2, ffn = 176, vocab = 16, max_seq = 32, tie_embeddings = false> head lm
rlhf.dataset @d "d.jsonl" : !rlhf.record<prompt: tensor<16x5xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<prompt: tensor<16x5xi32, #rlhf.kind<tokens>>>
  %p = rlhf.field %b["prompt"] : !rlhf.record<prompt: tensor<16x5xi32, #rlhf.kind<tokens>>>
  %g = rlhf.generate @actor(%p) max_new_tokens 2 n 2 temperature 1.0 top_p 1.0 on <0, 4> as <dp = 4, tp = 1, pp = 1, mbs = 1> pinned : tensor<16x5xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<32x7xi32, #rlhf.kind<tokens>>, logprobs: tensor<32x7xf32, #rlhf.kind<logprobs>>>
  %seq = rlhf.field %g["seq"] : !rlhf.record<seq: tensor<32x7xi32, #rlhf.kind<tokens>>, logprobs: tensor<32x7xf32, #rlhf.kind<logprobs>>>
  %seq2 = rlhf.transfer %seq from <0, 4> dp 4 to <0, 4> dp 2 : tensor<32x7xi32, #rlhf.kind<tokens>>
  %r = rlhf.inference @ref(%seq2) on <0, 4> as <dp = 4, tp = 1, pp = 1, mbs = 1> pinned : tensor<32x7xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<32x7xi32, #rlhf.kind<tokens>>, logprobs: tensor<32x7xf32, #rlhf.kind<logprobs>>>
  %s = rlhf.train_step @actor fn "f"(%seq) minibatches 1 epochs 1 settings {} on <0, 4> as <dp = 4, tp = 1, pp = 1, mbs = 1> pinned body {
  ^bb0(%t: tensor<?x?xi32>):
    %lp = rlhf.model_output logprobs %t : tensor<?x?xi32> -> tensor<?x?xf32>
    %m = rlhf.mask_of %t : tensor<?x?xi32> -> tensor<?x?xf32>
    %l = rlhf.reduce token mean %lp, %m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %l : f64
  } : tensor<32x7xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
}
