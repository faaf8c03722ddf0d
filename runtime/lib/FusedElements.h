//===- FusedElements.h - per-thread bodies of the fused kernels -*- C++ -*-===//
//
// What one CUDA thread of FusedKernels.cu computes: SwiGLU and rotary
// embedding, forward and backward, for one group of V adjacent elements.
// Host and device code alike, so the CPU tests run these very bodies over
// every group and check them against LibTorch's separate ops; only the
// launch (grid and stream) is the GPU's alone.
//
// Tensors arrive as raw pointers with element strides; each one's last
// dimension is contiguous. Group indices are split in 32-bit arithmetic
// (64-bit division is many instructions per thread on a GPU): a launch
// holds fewer than 2^32 groups, which FusedOps.cpp checks. Math is in fp32
// whatever the storage dtype, with one rounding per output where the separate
// ops round after each op.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_FUSEDELEMENTS_H
#define RLHF_RUNTIME_FUSEDELEMENTS_H

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__CUDACC__)
#define RLHF_HD __host__ __device__ __forceinline__
#define RLHF_UNROLL _Pragma("unroll")
#else
#define RLHF_HD inline
#define RLHF_UNROLL _Pragma("GCC unroll 8")
#endif

namespace rlhf::fused {

enum class Dtype : int { Float, Half, BFloat16 };

/// V elements of T moved as one load or store: 16 bytes for V = 16 /
/// sizeof(T), which needs every base pointer and row stride aligned to it.
template <typename T, int V> struct alignas(sizeof(T) * V) Pack { T v[V]; };

template <typename T, int V>
RLHF_HD Pack<T, V> load(const void *base, int64_t at) {
  return *reinterpret_cast<const Pack<T, V> *>(static_cast<const T *>(base) +
                                               at);
}

template <typename T, int V>
RLHF_HD void store(void *base, int64_t at, const Pack<T, V> &p) {
  *reinterpret_cast<Pack<T, V> *>(static_cast<T *>(base) + at) = p;
}

//===----------------------------------------------------------------------===//
// SwiGLU: y = silu(gate) * up over [rows, cols]
//===----------------------------------------------------------------------===//

struct SwiGluArgs {
  int64_t rows = 0, cols = 0;
  const void *gate = nullptr, *up = nullptr;
  int64_t gateStride = 0, upStride = 0; ///< row strides, in elements
  void *out = nullptr;                  ///< forward: y; contiguous
  /// Backward: the gradient of y in, those of gate and up out (contiguous).
  const void *grad = nullptr;
  int64_t gradStride = 0;
  void *gradGate = nullptr, *gradUp = nullptr;

  RLHF_HD int64_t groups(int v) const { return rows * (cols / v); }
};

template <typename T, int V>
RLHF_HD void swiGluForward(const SwiGluArgs &a, int64_t group) {
  const uint32_t per = uint32_t(a.cols / V), g32 = uint32_t(group);
  const int64_t r = g32 / per, c = int64_t(g32 % per) * V;
  const Pack<T, V> g = load<T, V>(a.gate, r * a.gateStride + c),
                   u = load<T, V>(a.up, r * a.upStride + c);
  Pack<T, V> y;
  RLHF_UNROLL
  for (int j = 0; j < V; ++j) {
    const float x = static_cast<float>(g.v[j]);
    y.v[j] = static_cast<T>(x / (1.0f + expf(-x)) * static_cast<float>(u.v[j]));
  }
  store<T, V>(a.out, r * a.cols + c, y);
}

/// d gate = dy * up * s * (1 + gate * (1 - s)) with s = sigmoid(gate);
/// d up = dy * silu(gate).
template <typename T, int V>
RLHF_HD void swiGluBackward(const SwiGluArgs &a, int64_t group) {
  const uint32_t per = uint32_t(a.cols / V), g32 = uint32_t(group);
  const int64_t r = g32 / per, c = int64_t(g32 % per) * V;
  const Pack<T, V> g = load<T, V>(a.gate, r * a.gateStride + c),
                   u = load<T, V>(a.up, r * a.upStride + c),
                   dy = load<T, V>(a.grad, r * a.gradStride + c);
  Pack<T, V> dg, du;
  RLHF_UNROLL
  for (int j = 0; j < V; ++j) {
    const float x = static_cast<float>(g.v[j]), d = static_cast<float>(dy.v[j]);
    const float s = 1.0f / (1.0f + expf(-x));
    du.v[j] = static_cast<T>(d * x * s);
    dg.v[j] = static_cast<T>(d * static_cast<float>(u.v[j]) * s *
                             (1.0f + x * (1.0f - s)));
  }
  store<T, V>(a.gradGate, r * a.cols + c, dg);
  store<T, V>(a.gradUp, r * a.cols + c, du);
}

//===----------------------------------------------------------------------===//
// Rotary embedding: y = x * cos + roll(x, D/2) * sinRot over [B, H, S, D]
//===----------------------------------------------------------------------===//

/// One [B, H, S, D] tensor rotated: strides of b, h and s, in elements.
/// `copy` moves it unrotated (a decode step's values into their cache);
/// `position`, a device pointer, offsets the output by that many s-strides
/// (the cache slot a step writes, known only on the device).
struct RotaryTensor {
  const void *in = nullptr;
  void *out = nullptr;
  int64_t heads = 0;
  int64_t inStride[3] = {0, 0, 0}, outStride[3] = {0, 0, 0};
  bool copy = false;
  const int64_t *position = nullptr;
};

/// Up to three tensors (q, k and v) over one table pair in one launch. The
/// tables are [B, S, D] by their strides (cos and rotate_half's signed sin,
/// as the separate ops take them). Backward applies the transpose:
/// dx[j] = dy[j] cos[j] + dy[r(j)] sinRot[r(j)], r swapping the halves.
struct RotaryArgs {
  static constexpr int kMaxTensors = 3;
  RotaryTensor t[kMaxTensors];
  int count = 0;
  int64_t batch = 0, seq = 0, dim = 0;
  const void *cos = nullptr, *sin = nullptr;
  int64_t tableStride[2] = {0, 0}; ///< b, s
  bool backward = false;

  RLHF_HD int64_t groups(int k, int v) const {
    return batch * t[k].heads * seq * (dim / 2 / v);
  }
  RLHF_HD int64_t groups(int v) const {
    int64_t n = 0;
    for (int k = 0; k < count; ++k)
      n += groups(k, v);
    return n;
  }
};

template <typename T, int V>
RLHF_HD void rotary(const RotaryArgs &a, int64_t group) {
  int k = 0;
  while (k + 1 < a.count && group >= a.groups(k, V)) {
    group -= a.groups(k, V);
    ++k;
  }
  const RotaryTensor &t = a.t[k];
  const int64_t half = a.dim / 2;
  const uint32_t per = uint32_t(half / V), seq = uint32_t(a.seq),
                 heads = uint32_t(t.heads);
  uint32_t row = uint32_t(group) / per;
  const int64_t d = int64_t(uint32_t(group) % per) * V;
  const int64_t s = row % seq;
  row /= seq;
  const int64_t h = row % heads, b = row / heads;
  const int64_t in = b * t.inStride[0] + h * t.inStride[1] + s * t.inStride[2],
                out = b * t.outStride[0] + h * t.outStride[1] +
                      (s + (t.position ? *t.position : 0)) * t.outStride[2],
                tab = b * a.tableStride[0] + s * a.tableStride[1];
  const Pack<T, V> x1 = load<T, V>(t.in, in + d),
                   x2 = load<T, V>(t.in, in + d + half);
  if (t.copy) {
    store<T, V>(t.out, out + d, x1);
    store<T, V>(t.out, out + d + half, x2);
    return;
  }
  const Pack<T, V> c1 = load<T, V>(a.cos, tab + d),
                   c2 = load<T, V>(a.cos, tab + d + half),
                   s1 = load<T, V>(a.sin, tab + d),
                   s2 = load<T, V>(a.sin, tab + d + half);
  Pack<T, V> y1, y2;
  RLHF_UNROLL
  for (int j = 0; j < V; ++j) {
    const float f1 = static_cast<float>(x1.v[j]),
                f2 = static_cast<float>(x2.v[j]);
    // Forward: y1 = x1 c1 + x2 s1, y2 = x2 c2 + x1 s2; backward swaps the
    // sines' halves.
    const float sa = static_cast<float>(a.backward ? s2.v[j] : s1.v[j]),
                sb = static_cast<float>(a.backward ? s1.v[j] : s2.v[j]);
    y1.v[j] = static_cast<T>(f1 * static_cast<float>(c1.v[j]) + f2 * sa);
    y2.v[j] = static_cast<T>(f2 * static_cast<float>(c2.v[j]) + f1 * sb);
  }
  store<T, V>(t.out, out + d, y1);
  store<T, V>(t.out, out + d + half, y2);
}

//===----------------------------------------------------------------------===//
// Batched copy: many 2-d slices (rows of contiguous bytes) in one launch
//===----------------------------------------------------------------------===//

/// One slice: `rows` rows of `rowBytes` bytes, each row contiguous, rows
/// `pitch` bytes apart.
struct CopySlice {
  char *dst = nullptr;
  const char *src = nullptr;
  int64_t rows = 0, rowBytes = 0, dstPitch = 0, srcPitch = 0;
};

/// Up to kMaxSlices slices (what fits the 4 KiB of a kernel's parameters),
/// each cut into tiles of `unitsPerTile` units: firstTile[k] is slice k's
/// first tile, firstTile[count] the total.
struct CopyArgs {
  static constexpr int kMaxSlices = 48;
  int count = 0;
  int64_t unitsPerTile = 1;
  int64_t firstTile[kMaxSlices + 1] = {0};
  CopySlice s[kMaxSlices];

  RLHF_HD int64_t tiles() const { return firstTile[count]; }
};

/// Lane `lane` of `lanes` copying tile `tile` in units of V x U bytes (a
/// CUDA block's threads on the GPU; one lane on the host). A slice holds
/// under 2^32 units (the launcher checks), so 32-bit division finds rows.
template <typename U, int V>
RLHF_HD void copyTile(const CopyArgs &a, int64_t tile, int64_t lane,
                      int64_t lanes) {
  int lo = 0, hi = a.count - 1; // the last slice starting at or before tile
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.firstTile[mid] <= tile)
      lo = mid;
    else
      hi = mid - 1;
  }
  const CopySlice &s = a.s[lo];
  constexpr int64_t kUnit = int64_t(sizeof(U)) * V;
  const uint32_t units = uint32_t(s.rowBytes / kUnit);
  const int64_t first = (tile - a.firstTile[lo]) * a.unitsPerTile;
  const int64_t total = s.rows * int64_t(units);
  const int64_t end =
      first + a.unitsPerTile < total ? first + a.unitsPerTile : total;
  for (int64_t i = first + lane; i < end; i += lanes) {
    const uint32_t row = uint32_t(i) / units, unit = uint32_t(i) % units;
    const int64_t at = int64_t(unit) * kUnit;
    *reinterpret_cast<Pack<U, V> *>(s.dst + row * s.dstPitch + at) =
        *reinterpret_cast<const Pack<U, V> *>(s.src + row * s.srcPitch + at);
  }
}

/// The widest unit (16, 8, 4, 2 or 1 bytes) every slice's pointers,
/// pitches and row length allow.
inline int copyUnitBytes(const CopyArgs &a) {
  int w = 16;
  auto fits = [&](int64_t v) { return v % w == 0; };
  for (int k = 0; k < a.count; ++k) {
    const CopySlice &c = a.s[k];
    while (w > 1 && !(fits(reinterpret_cast<uintptr_t>(c.dst)) &&
                      fits(reinterpret_cast<uintptr_t>(c.src)) &&
                      fits(c.rowBytes) && fits(c.dstPitch) && fits(c.srcPitch)))
      w /= 2;
  }
  return w;
}

/// The bodies as types, for the launchers' templates (device and host).
template <typename T, int V> struct SwiGluForwardBody {
  static RLHF_HD void run(const SwiGluArgs &a, int64_t i) {
    swiGluForward<T, V>(a, i);
  }
};
template <typename T, int V> struct SwiGluBackwardBody {
  static RLHF_HD void run(const SwiGluArgs &a, int64_t i) {
    swiGluBackward<T, V>(a, i);
  }
};
template <typename T, int V> struct RotaryBody {
  static RLHF_HD void run(const RotaryArgs &a, int64_t i) {
    rotary<T, V>(a, i);
  }
};

//===----------------------------------------------------------------------===//
// Choosing and instantiating a group width
//===----------------------------------------------------------------------===//

inline int elementSize(Dtype d) { return d == Dtype::Float ? 4 : 2; }

/// The widest group, at most 16 bytes, that `run` (the contiguous length a
/// group must not cross) and every pointer's and row stride's alignment
/// allow.
inline int widthFor(Dtype d, int64_t run, const std::vector<const void *> &ptrs,
                    const std::vector<int64_t> &strides) {
  const int size = elementSize(d);
  int v = 16 / size;
  auto fits = [&](int w) {
    if (run % w)
      return false;
    for (const void *p : ptrs)
      if (p && reinterpret_cast<uintptr_t>(p) % (uintptr_t(w) * size))
        return false;
    for (int64_t s : strides)
      if (s % w)
        return false;
    return true;
  };
  while (v > 1 && !fits(v))
    v /= 2;
  return v;
}

template <typename T, typename F> bool dispatchWidth(int width, F &f) {
  switch (width) {
  case 1:
    f.template run<T, 1>();
    return true;
  case 2:
    f.template run<T, 2>();
    return true;
  case 4:
    f.template run<T, 4>();
    return true;
  case 8:
    if constexpr (sizeof(T) == 2) {
      f.template run<T, 8>();
      return true;
    }
    return false;
  default:
    return false;
  }
}

/// Calls f.run<T, V>() for `dtype`'s T and `width`; false for a width
/// widthFor never gives.
template <typename F> bool dispatch(Dtype dtype, int width, F &f) {
  switch (dtype) {
  case Dtype::Float:
    return dispatchWidth<float>(width, f);
  case Dtype::Half:
    return dispatchWidth<c10::Half>(width, f);
  case Dtype::BFloat16:
    return dispatchWidth<c10::BFloat16>(width, f);
  }
  return false;
}

/// Calls f.run<U, V>() for a unit of `bytes`; false for another size.
template <typename F> bool dispatchUnit(int bytes, F &f) {
  if (bytes >= 4)
    return bytes % 4 == 0 && dispatchWidth<uint32_t>(bytes / 4, f);
  return bytes == 2   ? dispatchWidth<uint16_t>(1, f)
         : bytes == 1 ? dispatchWidth<uint8_t>(1, f)
                      : false;
}

} // namespace rlhf::fused

#endif // RLHF_RUNTIME_FUSEDELEMENTS_H
