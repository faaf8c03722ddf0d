//===- FusedOps.h - SwiGLU and rotary embedding as fused ops ----*- C++ -*-===//
//
// The model's elementwise chains as one kernel each on CUDA, differentiable
// (autograd functions whose backward is one kernel too). On CPU tensors the
// same per-element bodies run on the host, which is how the CPU tests check
// them; the model itself takes these only where `enabled` says so.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_FUSEDOPS_H
#define RLHF_RUNTIME_FUSEDOPS_H

#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace rlhf::fused {

/// Whether the model should use the fused ops for `t`: a CUDA tensor in a
/// build with the kernels. RLHF_FUSED_KERNELS=0 keeps the separate ops (for
/// side-by-side measurements); =cpu takes the host bodies for CPU tensors
/// too, so CPU tests run the model's fused path.
bool enabled(c10::Device device);
inline bool enabled(const at::Tensor &t) { return enabled(t.device()); }

/// LibTorch's separate ops that the fused ones replace: the model's path
/// where no fused kernel serves, and the benchmark's baseline. Rotary is
/// x * cos + rotate_half(x) * sin as transformers writes it, with
/// rotate_half's sign folded into `sinRot` ([-sin, sin]): three kernels (a
/// roll and a fused multiply-add) where the halves' negation and
/// concatenation took five.
at::Tensor swiGluOps(const at::Tensor &gate, const at::Tensor &up);
at::Tensor rotaryOps(const at::Tensor &x, const at::Tensor &cos,
                     const at::Tensor &sinRot);

/// silu(gate) * up, contiguous, for gate and up of one shape and dtype
/// (fp32, fp16 or bf16) whose leading dimensions collapse to one row stride
/// (a narrow of the last dimension does). Undefined where it cannot serve.
at::Tensor swiGlu(const at::Tensor &gate, const at::Tensor &up);

/// x * cos + roll(x, D/2, -1) * sinRot for q [B, H, S, D] and k [B, H', S,
/// D] in one launch, with the tables [B or 1, 1, S, D] of their dtype.
/// Outputs are laid out [B, S, H, D] and viewed [B, H, S, D], as attention
/// reads them. Undefined tensors where it cannot serve.
std::pair<at::Tensor, at::Tensor> rotary(const at::Tensor &q,
                                         const at::Tensor &k,
                                         const at::Tensor &cos,
                                         const at::Tensor &sinRot);

/// A decode step's rotary and cache write in one launch: returns q rotated
/// (as `rotary` does) and writes k rotated and v as they are into `keys`
/// and `values` [B, H', capacity, D] at position `slot` of dimension 2 (one
/// int64 on the device, as the step's graph reads it; the caller keeps it
/// within the capacity), where rotary's launch and two index_copy_ took
/// three. Not differentiable. Undefined, with nothing written, where it
/// cannot serve.
at::Tensor rotaryIntoCache(const at::Tensor &q, const at::Tensor &k,
                           const at::Tensor &v, const at::Tensor &cos,
                           const at::Tensor &sinRot, const at::Tensor &keys,
                           const at::Tensor &values, const at::Tensor &slot);

/// dst.copy_(src) for every pair, slices of up to two dimensions with a
/// contiguous last one batched: on CUDA one kernel per 48 slices, which
/// replaces a launch (and LibTorch's host work) per slice; on the host the
/// same tiles. Pairs it cannot batch (other shapes, dtypes or devices) are
/// copied with copy_.
void copySlices(const std::vector<std::pair<at::Tensor, at::Tensor>> &pairs);

} // namespace rlhf::fused

#endif // RLHF_RUNTIME_FUSEDOPS_H
