//===- Attention.cpp - scaled dot-product attention over grouped KV heads -===//

#include "rlhf/runtime/Attention.h"

#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>

using namespace rlhf;

bool rlhf::sdpChoosesFlash(const at::Tensor &q, const at::Tensor &k,
                           const at::Tensor &v, bool enableGqa) {
  return at::_fused_sdp_choice(q, k, v, std::nullopt, 0.0, /*is_causal=*/true,
                               std::nullopt, enableGqa) ==
         int64_t(at::SDPBackend::flash_attention);
}

at::Tensor rlhf::attention(const at::Tensor &q, at::Tensor k, at::Tensor v,
                           const at::Tensor &mask, GroupedKv grouped) {
  const int64_t B = q.size(0), H = q.size(1), D = q.size(3);
  const int64_t group = H / k.size(1);
  // Flash attention reads each KV head for its group (whole causal
  // sequences); a decode step folds the group into query rows, which share
  // the key mask. Elsewhere (prefill under a mask, other kernels) KV heads
  // are repeated, a copy of K and V that training would also keep.
  bool gqa = false, fold = false;
  if (group > 1 && grouped == GroupedKv::Shared) {
    fold = mask.defined() && q.size(2) == 1;
    gqa = !mask.defined() && sdpChoosesFlash(q, k, v, /*enableGqa=*/true);
  }
  if (group > 1 && !gqa && !fold) {
    k = k.repeat_interleave(group, 1);
    v = v.repeat_interleave(group, 1);
  }
  if (!mask.defined())
    return at::scaled_dot_product_attention(q, k, v, {}, 0.0,
                                            /*is_causal=*/true, std::nullopt,
                                            gqa);
  // [B, 1, S, T] broadcasts over heads, and over a group's rows.
  at::Tensor m =
      mask.scalar_type() == q.scalar_type() ? mask : mask.to(q.scalar_type());
  if (!fold)
    return at::scaled_dot_product_attention(q, k, v, m);
  return at::scaled_dot_product_attention(q.reshape({B, k.size(1), group, D}),
                                          k, v, m)
      .reshape({B, H, 1, D});
}
