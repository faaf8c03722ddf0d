func.func @f(%x: tensor<4x8xi32, #rlhf.kind<tokens>>) {
  %s = rlhf.train_step @actor fn "f"(%x) minibatches 1 epochs 1 settings {} body {
  ^bb0(%t: tensor<?x?xi32>):
    %lp = "rlhf.model_output"(%t) : (tensor<?x?xi32>) -> tensor<?x?xf32>
    %m = rlhf.mask_of %t : tensor<?x?xi32> -> tensor<?x?xf32>
    %l = rlhf.reduce token mean %lp, %m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
    rlhf.yield %l : f64
  } : tensor<4x8xi32, #rlhf.kind<tokens>> -> !rlhf.record<loss: tensor<f32, #rlhf.kind<loss>>>
  return
}
