//===- FusedOps.cpp - fused SwiGLU and rotary as differentiable ops -------===//
//
// Tensors to FusedElements.h's arguments, launched on the tensor's current
// CUDA stream or run on the host over the same bodies, and wrapped in
// autograd functions whose backward is one fused pass as well.
//
//===----------------------------------------------------------------------===//

#include "FusedOps.h"
#include "FusedKernels.h"

#include "rlhf/runtime/Error.h"

#include <ATen/Parallel.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/torch.h>

#include <cstdlib>
#include <optional>
#include <string>

using namespace rlhf;
using namespace rlhf::fused;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

namespace {

std::optional<Dtype> dtypeOf(const at::Tensor &t) {
  switch (t.scalar_type()) {
  case at::kFloat:
    return Dtype::Float;
  case at::kHalf:
    return Dtype::Half;
  case at::kBFloat16:
    return Dtype::BFloat16;
  default:
    return std::nullopt;
  }
}

/// The one stride between rows of `t` viewed [rows, last dim], which needs
/// a contiguous last dimension and leading dimensions that collapse.
std::optional<int64_t> rowStride(const at::Tensor &t) {
  if (t.dim() == 0 || (t.size(-1) > 1 && t.stride(-1) != 1))
    return std::nullopt;
  std::optional<int64_t> row;
  int64_t span = 0; // stride x size of the last dimension kept
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    if (t.size(d) == 1)
      continue;
    if (!row)
      row = t.stride(d);
    else if (t.stride(d) != span)
      return std::nullopt;
    span = t.stride(d) * t.size(d);
  }
  return row.value_or(t.size(-1));
}

template <template <typename, int> class Body, typename Args> struct OnHost {
  const Args &a;
  template <typename T, int V> void run() {
    at::parallel_for(0, a.groups(V), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        Body<T, V>::run(a, i);
    });
  }
};

/// Calls `launch` with the current stream of `on`'s device (that device
/// current) and throws the error it returns, named `what`.
template <typename F>
void launchOn(const at::Tensor &on, const char *what, const F &launch) {
  const c10::DeviceGuard guard(on.device());
  void *stream = c10::impl::getDeviceGuardImpl(on.device().type())
                     ->getStream(on.device())
                     .native_handle();
  if (const char *err = launch(stream))
    throw Error(std::string(what) + ": " + err);
}

/// Runs Body over `a` where `on` lives: one kernel on its device's current
/// stream, or the host loop.
template <template <typename, int> class Body, typename Args>
void run(const at::Tensor &on, Dtype dtype, int width, const Args &a,
         const char *(*launcher)(Dtype, int, const Args &, void *)) {
  if (on.is_cuda()) {
    launchOn(on, "fused kernel",
             [&](void *stream) { return launcher(dtype, width, a, stream); });
    return;
  }
  OnHost<Body, Args> host{a};
  if (!dispatch(dtype, width, host))
    throw Error("fused op: no body for this dtype and group width");
}

//===----------------------------------------------------------------------===//
// SwiGLU
//===----------------------------------------------------------------------===//

/// The bodies split group indices in 32 bits (FusedElements.h).
constexpr int64_t kMaxGroups = int64_t(1) << 32;

bool servesSwiGlu(const at::Tensor &g, const at::Tensor &u) {
  return g.defined() && u.defined() && dtypeOf(g) &&
         g.scalar_type() == u.scalar_type() && g.sizes() == u.sizes() &&
         g.device() == u.device() && g.numel() > 0 && g.numel() < kMaxGroups &&
         rowStride(g) && rowStride(u);
}

/// The arguments both directions share: gate and up as [rows, cols].
SwiGluArgs swiGluArgs(const at::Tensor &g, const at::Tensor &u) {
  SwiGluArgs a;
  a.cols = g.size(-1);
  a.rows = g.numel() / a.cols;
  a.gate = g.data_ptr();
  a.up = u.data_ptr();
  a.gateStride = *rowStride(g);
  a.upStride = *rowStride(u);
  return a;
}

at::Tensor swiGluForwardRaw(const at::Tensor &g, const at::Tensor &u) {
  at::Tensor y = at::empty(g.sizes(), g.options());
  SwiGluArgs a = swiGluArgs(g, u);
  a.out = y.data_ptr();
  const Dtype d = *dtypeOf(g);
  const int w =
      widthFor(d, a.cols, {a.gate, a.up, a.out}, {a.gateStride, a.upStride});
  run<SwiGluForwardBody>(g, d, w, a, launchSwiGluForward);
  return y;
}

std::pair<at::Tensor, at::Tensor>
swiGluBackwardRaw(const at::Tensor &g, const at::Tensor &u, at::Tensor dy) {
  if (!rowStride(dy) || dy.scalar_type() != g.scalar_type())
    dy = dy.to(g.scalar_type()).contiguous();
  at::Tensor dg = at::empty(g.sizes(), g.options()),
             du = at::empty(g.sizes(), g.options());
  SwiGluArgs a = swiGluArgs(g, u);
  a.grad = dy.data_ptr();
  a.gradStride = *rowStride(dy);
  a.gradGate = dg.data_ptr();
  a.gradUp = du.data_ptr();
  const Dtype d = *dtypeOf(g);
  const int w =
      widthFor(d, a.cols, {a.gate, a.up, a.grad, a.gradGate, a.gradUp},
               {a.gateStride, a.upStride, a.gradStride});
  run<SwiGluBackwardBody>(g, d, w, a, launchSwiGluBackward);
  return {dg, du};
}

/// Keeps gate and up for backward, as the separate ops' replay did: no
/// silu(gate) is stored.
struct SwiGluFn : torch::autograd::Function<SwiGluFn> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &g,
                            const at::Tensor &u) {
    ctx->save_for_backward({g, u});
    return swiGluForwardRaw(g, u);
  }
  static tensor_list backward(AutogradContext *ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    auto [dg, du] = swiGluBackwardRaw(saved[0], saved[1], grads[0]);
    return {ctx->needs_input_grad(0) ? dg : at::Tensor(),
            ctx->needs_input_grad(1) ? du : at::Tensor()};
  }
};

//===----------------------------------------------------------------------===//
// Rotary embedding
//===----------------------------------------------------------------------===//

bool servesRotaryTensor(const at::Tensor &x, const at::Tensor &like) {
  return x.defined() && x.dim() == 4 && x.scalar_type() == like.scalar_type() &&
         x.device() == like.device() && x.size(0) == like.size(0) &&
         x.size(2) == like.size(2) && x.size(3) == like.size(3) &&
         x.stride(3) == 1;
}

bool servesRotary(const at::Tensor &q, const at::Tensor &k,
                  const at::Tensor &cos, const at::Tensor &sin) {
  if (!q.defined() || q.dim() != 4 || !dtypeOf(q) || q.size(3) % 2 ||
      q.numel() == 0 || !servesRotaryTensor(q, q) ||
      !servesRotaryTensor(k, q) || q.numel() + 2 * k.numel() >= kMaxGroups)
    return false;
  for (const at::Tensor &t : {cos, sin})
    if (!t.defined() || t.dim() != 4 || t.scalar_type() != q.scalar_type() ||
        t.device() != q.device() || t.size(1) != 1 || t.size(3) != q.size(3) ||
        t.stride(3) != 1 || (t.size(0) != 1 && t.size(0) != q.size(0)) ||
        (t.size(2) != 1 && t.size(2) != q.size(2)))
      return false;
  return cos.sizes() == sin.sizes() && cos.strides() == sin.strides();
}

/// One tensor of a rotary launch: `out` undefined for a new [B, S, H, D]
/// tensor viewed [B, H, S, D]; `copy` to move `in` unrotated; `position`
/// (one int64 on the device) to write at that offset of out's dim 2.
struct RotaryJob {
  at::Tensor in, out;
  bool copy = false;
  at::Tensor position;
};

/// Runs `jobs` (up to three) in one launch over the tables; `backward`
/// applies the transpose to gradients. Returns the outputs.
std::vector<at::Tensor> rotaryRun(std::vector<RotaryJob> jobs,
                                  const at::Tensor &cos, const at::Tensor &sin,
                                  bool backward) {
  const at::Tensor &first = jobs[0].in;
  RotaryArgs a;
  a.batch = first.size(0);
  a.seq = first.size(2);
  a.dim = first.size(3);
  a.cos = cos.data_ptr();
  a.sin = sin.data_ptr();
  a.tableStride[0] = cos.size(0) == 1 ? 0 : cos.stride(0);
  a.tableStride[1] = cos.size(2) == 1 ? 0 : cos.stride(2);
  a.backward = backward;
  std::vector<at::Tensor> outs;
  std::vector<const void *> ptrs{a.cos, a.sin};
  std::vector<int64_t> strides{a.tableStride[0], a.tableStride[1]};
  for (RotaryJob &j : jobs) {
    at::Tensor &x = j.in;
    if (x.stride(3) != 1)
      x = x.contiguous();
    if (!j.out.defined())
      j.out = at::empty({a.batch, a.seq, x.size(1), a.dim}, x.options())
                  .transpose(1, 2);
    RotaryTensor &t = a.t[a.count++];
    t.in = x.data_ptr();
    t.out = j.out.data_ptr();
    t.heads = x.size(1);
    t.copy = j.copy;
    t.position =
        j.position.defined() ? j.position.data_ptr<int64_t>() : nullptr;
    for (int d = 0; d < 3; ++d) {
      t.inStride[d] = x.stride(d);
      t.outStride[d] = j.out.stride(d);
      strides.push_back(t.inStride[d]);
      strides.push_back(t.outStride[d]);
    }
    ptrs.push_back(t.in);
    ptrs.push_back(t.out);
    outs.push_back(j.out);
  }
  const Dtype d = *dtypeOf(first);
  const int w = widthFor(d, a.dim / 2, ptrs, strides);
  run<RotaryBody>(first, d, w, a, launchRotary);
  return outs;
}

/// Rotates `xs` (one or two tensors) into new tensors.
std::vector<at::Tensor> rotaryRaw(const std::vector<at::Tensor> &xs,
                                  const at::Tensor &cos, const at::Tensor &sin,
                                  bool backward) {
  std::vector<RotaryJob> jobs;
  for (const at::Tensor &x : xs)
    jobs.push_back({x});
  return rotaryRun(std::move(jobs), cos, sin, backward);
}

/// Keeps only the tables: rotation is linear, so backward needs no input.
struct RotaryFn : torch::autograd::Function<RotaryFn> {
  static tensor_list forward(AutogradContext *ctx, const at::Tensor &q,
                             const at::Tensor &k, const at::Tensor &cos,
                             const at::Tensor &sin) {
    ctx->save_for_backward({cos, sin});
    return rotaryRaw({q, k}, cos, sin, /*backward=*/false);
  }
  static tensor_list backward(AutogradContext *ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    std::vector<at::Tensor> in;
    for (const at::Tensor &g : grads)
      if (g.defined())
        in.push_back(g);
    tensor_list out(4);
    if (in.empty())
      return out;
    std::vector<at::Tensor> got =
        rotaryRaw(in, saved[0], saved[1], /*backward=*/true);
    size_t k = 0;
    for (size_t i = 0; i < 2; ++i)
      if (grads[i].defined() && ctx->needs_input_grad(i))
        out[i] = got[k++];
      else if (grads[i].defined())
        ++k;
    return out;
  }
};

//===----------------------------------------------------------------------===//
// Batched copies
//===----------------------------------------------------------------------===//

/// dst.copy_(src) as a CopySlice, if the pair is one.
std::optional<CopySlice> copySliceOf(const at::Tensor &dst,
                                     const at::Tensor &src) {
  if (!dst.defined() || !src.defined() ||
      dst.scalar_type() != src.scalar_type() || dst.sizes() != src.sizes() ||
      dst.device() != src.device() || dst.dim() > 2 || dst.numel() == 0)
    return std::nullopt;
  const int64_t es = dst.element_size();
  CopySlice c;
  c.dst = static_cast<char *>(dst.data_ptr());
  c.src = static_cast<const char *>(src.data_ptr());
  const int64_t last = dst.dim() ? dst.size(-1) : 1;
  if (last > 1 && (dst.stride(-1) != 1 || src.stride(-1) != 1))
    return std::nullopt;
  c.rows = dst.dim() == 2 ? dst.size(0) : 1;
  c.rowBytes = last * es;
  c.dstPitch = dst.dim() == 2 ? dst.stride(0) * es : c.rowBytes;
  c.srcPitch = dst.dim() == 2 ? src.stride(0) * es : c.rowBytes;
  // Rows are found by 32-bit division: a slice of 2^32 bytes or more (so
  // possibly as many units) is left to copy_.
  if (c.rows * c.rowBytes >= (int64_t(1) << 32))
    return std::nullopt;
  return c;
}

struct CopyOnHost {
  const CopyArgs &a;
  template <typename U, int V> void run() {
    at::parallel_for(0, a.tiles(), 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        copyTile<U, V>(a, t, 0, 1);
    });
  }
};

/// 64 KiB per tile: 16 rounds of a 256-thread block's 16-byte units.
constexpr int64_t kTileBytes = 64 << 10;

void launchBatch(const at::Tensor &on, CopyArgs &a) {
  const int unit = copyUnitBytes(a);
  a.unitsPerTile = kTileBytes / unit;
  for (int k = 0; k < a.count; ++k) {
    const int64_t units = a.s[k].rows * (a.s[k].rowBytes / unit);
    a.firstTile[k + 1] =
        a.firstTile[k] + (units + a.unitsPerTile - 1) / a.unitsPerTile;
  }
  if (on.is_cuda()) {
    launchOn(on, "batched copy",
             [&](void *stream) { return launchCopies(unit, a, stream); });
    return;
  }
  CopyOnHost host{a};
  if (!dispatchUnit(unit, host))
    throw Error("batched copy: no body for this unit");
}

bool wantsGrad(const at::Tensor &a, const at::Tensor &b) {
  return at::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad());
}

} // namespace

at::Tensor rlhf::fused::swiGluOps(const at::Tensor &gate,
                                  const at::Tensor &up) {
  return at::silu(gate) * up;
}

at::Tensor rlhf::fused::rotaryOps(const at::Tensor &x, const at::Tensor &cos,
                                  const at::Tensor &sinRot) {
  return at::addcmul(x * cos, at::roll(x, x.size(-1) / 2, -1), sinRot);
}

bool rlhf::fused::enabled(c10::Device device) {
  static const std::string mode = [] {
    const char *e = std::getenv("RLHF_FUSED_KERNELS");
    return std::string(e ? e : "");
  }();
  if (mode == "0")
    return false;
  if (mode == "cpu" && device.is_cpu())
    return true;
  return device.is_cuda() && haveKernels();
}

at::Tensor rlhf::fused::swiGlu(const at::Tensor &gate, const at::Tensor &up) {
  if (!servesSwiGlu(gate, up))
    return {};
  return wantsGrad(gate, up) ? SwiGluFn::apply(gate, up)
                             : swiGluForwardRaw(gate, up);
}

std::pair<at::Tensor, at::Tensor>
rlhf::fused::rotary(const at::Tensor &q, const at::Tensor &k,
                    const at::Tensor &cos, const at::Tensor &sinRot) {
  if (!servesRotary(q, k, cos, sinRot))
    return {};
  tensor_list r = wantsGrad(q, k)
                      ? RotaryFn::apply(q, k, cos, sinRot)
                      : rotaryRaw({q, k}, cos, sinRot, /*backward=*/false);
  return {r[0], r[1]};
}

void rlhf::fused::copySlices(
    const std::vector<std::pair<at::Tensor, at::Tensor>> &pairs) {
  CopyArgs a;
  at::Tensor on; // the batch's device, by a tensor on it
  auto flush = [&] {
    if (a.count)
      launchBatch(on, a);
    a = CopyArgs();
  };
  for (const auto &[dst, src] : pairs) {
    std::optional<CopySlice> c = copySliceOf(dst, src);
    if (!c) { // in order: a later pair may read what an earlier wrote
      flush();
      dst.copy_(src);
      continue;
    }
    if (a.count && dst.device() != on.device())
      flush();
    if (a.count == CopyArgs::kMaxSlices)
      flush();
    on = dst;
    a.s[a.count++] = *c;
  }
  flush();
}

at::Tensor
rlhf::fused::rotaryIntoCache(const at::Tensor &q, const at::Tensor &k,
                             const at::Tensor &v, const at::Tensor &cos,
                             const at::Tensor &sinRot, const at::Tensor &keys,
                             const at::Tensor &values, const at::Tensor &slot) {
  if (!servesRotary(q, k, cos, sinRot) || !servesRotaryTensor(v, k) ||
      v.size(1) != k.size(1) ||
      (at::GradMode::is_enabled() &&
       (q.requires_grad() || k.requires_grad() || v.requires_grad())))
    return {};
  for (const at::Tensor &c : {keys, values})
    if (!c.defined() || c.dim() != 4 || c.scalar_type() != k.scalar_type() ||
        c.device() != k.device() || c.size(0) != k.size(0) ||
        c.size(1) != k.size(1) || c.size(3) != k.size(3) || c.stride(3) != 1 ||
        c.size(2) < k.size(2))
      return {};
  if (!slot.defined() || slot.numel() != 1 || slot.scalar_type() != at::kLong ||
      slot.device() != k.device())
    return {};
  return rotaryRun({{q}, {k, keys, false, slot}, {v, values, true, slot}}, cos,
                   sinRot, /*backward=*/false)[0];
}
