func.func @f(%x: tensor<4xf32, #rlhf.kind<score>>) {
  %r = rlhf.compute fn "f"(%x) {} body {
  ^bb0(%a: tensor<?xf32>):
  } : (tensor<4xf32, #rlhf.kind<score>>) -> !rlhf.record<adv: tensor<4xf32, #rlhf.kind<advantages>>>
  return
}
