//===- Attention.h - scaled dot-product attention over grouped KV heads ---===//
//
// The attention of a decoder layer (no sequence parallelism): ATen's
// scaled_dot_product_attention, causal for whole sequences or under the
// additive mask of left-padded generation, with grouped-query attention
// that avoids copying K and V per query head where it can.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_ATTENTION_H
#define RLHF_RUNTIME_ATTENTION_H

#include <ATen/core/Tensor.h>

namespace rlhf {

/// How KV heads shared by several query heads are read.
enum class GroupedKv {
  /// Without copies where a kernel allows (the default): flash attention's
  /// enable_gqa for whole causal sequences, and for one position under a
  /// mask (a decode step) each KV head's group of query heads folded into
  /// query rows that share the mask. Elsewhere, repeated.
  Shared,
  /// Every KV head repeated for each query head of its group first.
  Repeated,
};

/// Attention of q [B, H, S, D] over k, v [B, Hkv, T, D], H a multiple of
/// Hkv, query head h reading KV head h / (H / Hkv) (HF's repeat_kv order):
/// causal when `mask` is undefined (S == T), else under the additive
/// `mask` [B, 1, S, T]. Returns [B, H, S, D]; softmax accumulates in fp32.
at::Tensor attention(const at::Tensor &q, at::Tensor k, at::Tensor v,
                     const at::Tensor &mask,
                     GroupedKv grouped = GroupedKv::Shared);

/// Whether LibTorch's own choice for causal attention of q over k, v is its
/// flash kernel (with grouped KV heads read as they are when `enableGqa`).
/// That choice weighs dtype, device, head size and the user's
/// torch.backends settings; it reads no values.
bool sdpChoosesFlash(const at::Tensor &q, const at::Tensor &k,
                     const at::Tensor &v, bool enableGqa);

} // namespace rlhf

#endif // RLHF_RUNTIME_ATTENTION_H
