rlhf.cluster @c nodes 1 gpus_per_node 4 hardware <name = "cpu", bf16_flops = 2.0e11, hbm = 4.0e9, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 5.0e9, network_bandwidth = 1.0e9>
rlhf.model @actor <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 2, ffn = 176, vocab = 16, max_seq = 32, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 2, ffn = 176, vocab = 16, max_seq = 32, tie_embeddings = false> head lm
"rlhf.algorithm"() <{cluster = @c, save_interval = 0 : i64, seed = 1 : i64, steps = 1 : i64, sym_name = "a"}> ({
^bb0(%p: tensor<16x5xi32, #rlhf.kind<tokens>>):
  %g = rlhf.generate @ref(%p) max_new_tokens 2 n 1 temperature 1.0 top_p 1.0 on <0, 4> as <dp = 4, tp = 1, pp = 1, mbs = 1> : tensor<16x5xi32, #rlhf.kind<tokens>> -> !rlhf.record<seq: tensor<16x7xi32, #rlhf.kind<tokens>>, logprobs: tensor<16x7xf32, #rlhf.kind<logprobs>>>
}) : () -> ()
