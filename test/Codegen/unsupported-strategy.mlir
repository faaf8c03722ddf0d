// RUN: rlhf-opt %s --rlhf-lower-to-runtime --verify-diagnostics
// ZeRO, which the runtime does not implement, is rejected, not ignored.
rlhf.cluster @c nodes 1 gpus_per_node 4 hardware <name = "cpu", bf16_flops = 2.0e11, hbm = 4.0e9, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 5.0e9, network_bandwidth = 1.0e9>
rlhf.model @actor <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 2, ffn = 176, vocab = 16, max_seq = 32, tie_embeddings = false> head lm trainable
rlhf.dataset @d "d.jsonl" : !rlhf.record<text: tensor<8x8xi32, #rlhf.kind<tokens>>>
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %b = rlhf.load @d : !rlhf.record<text: tensor<8x8xi32, #rlhf.kind<tokens>>>
  %t = rlhf.field %b["text"] : !rlhf.record<text: tensor<8x8xi32, #rlhf.kind<tokens>>>
  // expected-error @+1 {{the runtime does not implement ZeRO optimizer sharding; drop 'zero' from this call's strategy}}
  %s = rlhf.train_step @actor sft(%t) minibatches 1 epochs 1 settings {} on <0, 4> as <dp = 4, tp = 1, pp = 1, mbs = 1, zero = true> : tensor<8x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
}
