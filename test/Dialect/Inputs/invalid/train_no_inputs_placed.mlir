rlhf.cluster @c nodes 1 gpus_per_node 4 hardware <name = "cpu", bf16_flops = 2.0e11, hbm = 4.0e9, hbm_bandwidth = 2.0e10, nvlink_bandwidth = 5.0e9, network_bandwidth = 1.0e9>
rlhf.model @actor <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 2, ffn = 176, vocab = 16, max_seq = 32, tie_embeddings = false> head lm trainable
rlhf.model @ref <name = "tiny", layers = 2, hidden = 64, heads = 4, kv_heads = 2, ffn = 176, vocab = 16, max_seq = 32, tie_embeddings = false> head lm
rlhf.algorithm @a cluster @c steps 1 seed 1 save_interval 0 {
  %s = "rlhf.train_step"() <{epochs = 1 : i64, fn = "f", minibatches = 1 : i64, model = @actor, settings = {}, mesh = #rlhf.mesh<0, 4>, strategy = #rlhf.strategy<dp = 4, tp = 1, pp = 1, mbs = 1>}> ({
  ^bb0:
    %t = arith.constant dense<1> : tensor<2x2xi32>
    %lp = rlhf.model_output logprobs %t : tensor<2x2xi32> -> tensor<?x?xf32>
    %l = rlhf.reduce token mean %lp, %lp : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %l : f64
  }) : () -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
}
