//===- FusedOpsTest.cpp - fused SwiGLU and rotary against LibTorch's ops --===//
//
// On the CPU the fused ops run FusedElements.h's bodies on the host: the
// same per-element code the CUDA kernels run, so these check its indexing,
// group widths and math on every CI run. FusedCuda.* (the `gpu` label)
// checks the kernels themselves.
//
//===----------------------------------------------------------------------===//

#include "FusedOps.h"
#include "CudaGate.h"
#include "FusedElements.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>

using namespace rlhf;

namespace {

/// One rounding of the fp32 result: half an ulp, with room for fp32's own
/// reordering where terms cancel.
double rtol(at::ScalarType t) {
  return t == at::kFloat ? 1e-5 : t == at::kHalf ? 1.0 / 2048 : 1.0 / 256;
}

void expectClose(const at::Tensor &got, const at::Tensor &ref,
                 at::ScalarType dtype, const std::string &what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.sizes(), ref.sizes()) << what;
  const at::Tensor g = got.to(at::kCPU, at::kFloat),
                   r = ref.to(at::kCPU, at::kFloat);
  const double scale = r.abs().max().item<double>();
  const at::Tensor excess =
      (g - r).abs() - (rtol(dtype) * r.abs() + 1e-6 * scale);
  EXPECT_LE(excess.max().item<double>(), 0.0)
      << what << ": max |diff| " << (g - r).abs().max().item<double>()
      << " at scale " << scale;
}

at::Tensor swiGluRef(const at::Tensor &g, const at::Tensor &u) {
  return at::silu(g.to(at::kFloat)) * u.to(at::kFloat);
}

at::Tensor rotaryRef(const at::Tensor &x, const at::Tensor &cos,
                     const at::Tensor &sin) {
  at::Tensor xf = x.to(at::kFloat);
  return xf * cos.to(at::kFloat) +
         at::roll(xf, x.size(-1) / 2, -1) * sin.to(at::kFloat);
}

/// Rotary tables as LlamaModel::layers builds them: [B, 1, S, D] of cos
/// and rotate_half's signed sin.
std::pair<at::Tensor, at::Tensor> tables(int64_t B, int64_t S, int64_t D,
                                         at::TensorOptions o) {
  at::Tensor inv =
      1.0 / at::pow(10000.0, at::arange(0, D, 2).to(at::kFloat) / double(D));
  at::Tensor pos = (at::arange(S).to(at::kFloat) + 3).expand({B, S});
  at::Tensor f = pos.unsqueeze(-1) * inv;
  at::Tensor c = f.cos(), s = f.sin();
  return {at::cat({c, c}, -1).unsqueeze(1).to(o),
          at::cat({-s, s}, -1).unsqueeze(1).to(o)};
}

const at::ScalarType kDtypes[] = {at::kFloat, at::kHalf, at::kBFloat16};

/// Forward and backward of fused::swiGlu on gate and up taken as `layout`
/// says from a base tensor, against fp32 ops and their autograd.
void checkSwiGlu(at::TensorOptions o, const std::string &layout) {
  at::Tensor base, g, u;
  if (layout == "contiguous") {
    base = at::randn({2 * 2 * 5 * 64}).mul(2).to(o);
    g = base.narrow(0, 0, 640).view({2, 5, 64});
    u = base.narrow(0, 640, 640).view({2, 5, 64});
  } else if (layout == "stacked") { // the no-grad gate/up GEMM's halves
    base = at::randn({2, 5, 128}).mul(2).to(o);
    g = base.narrow(-1, 0, 64);
    u = base.narrow(-1, 64, 64);
  } else if (layout == "odd") { // 7 columns: groups of one element
    base = at::randn({2, 3, 7}).mul(2).to(o);
    g = base[0];
    u = base[1];
  } else { // "shifted": rows one element off alignment
    base = at::randn({4, 33}).mul(2).to(o);
    g = base.narrow(-1, 1, 16);
    u = base.narrow(-1, 17, 16);
  }
  const std::string what =
      layout + " " + std::string(c10::toString(o.dtype().toScalarType()));
  at::Tensor y = fused::swiGlu(g, u);
  expectClose(y, swiGluRef(g, u), o.dtype().toScalarType(), what);
  EXPECT_TRUE(y.is_contiguous()) << what;

  at::Tensor b = base.detach().clone().requires_grad_(true);
  // Same views of the leaf (a view op for each layout above).
  at::Tensor gv = b.as_strided(g.sizes(), g.strides(), g.storage_offset()),
             uv = b.as_strided(u.sizes(), u.strides(), u.storage_offset());
  at::Tensor dy = at::randn(g.sizes()).to(o);
  fused::swiGlu(gv, uv).backward(dy);
  at::Tensor gf = g.to(at::kFloat).requires_grad_(true),
             uf = u.to(at::kFloat).requires_grad_(true);
  swiGluRef(gf, uf).backward(dy.to(at::kFloat));
  at::Tensor grad = b.grad();
  expectClose(grad.as_strided(g.sizes(), g.strides(), g.storage_offset()),
              gf.grad(), o.dtype().toScalarType(), what + " d gate");
  expectClose(grad.as_strided(u.sizes(), u.strides(), u.storage_offset()),
              uf.grad(), o.dtype().toScalarType(), what + " d up");
}

/// q and k as the layer makes them: views of projections [B, S, H * D]
/// transposed to [B, H, S, D], or of one stacked q/k/v projection.
void checkRotary(at::TensorOptions o, int64_t D, bool stacked,
                 bool broadcastTables) {
  const int64_t B = 2, S = 5, H = 4, KV = 2;
  at::Tensor q, k, leafQ, leafK;
  if (stacked) {
    at::Tensor y = at::randn({B, S, (H + 2 * KV) * D}).to(o);
    q = y.narrow(-1, 0, H * D).view({B, S, H, D}).transpose(1, 2);
    k = y.narrow(-1, H * D, KV * D).view({B, S, KV, D}).transpose(1, 2);
  } else {
    q = at::randn({B, S, H * D}).to(o).view({B, S, H, D}).transpose(1, 2);
    k = at::randn({B, S, KV * D}).to(o).view({B, S, KV, D}).transpose(1, 2);
  }
  auto [cos, sin] = tables(broadcastTables ? 1 : B, S, D, o);
  const at::ScalarType dt = o.dtype().toScalarType();
  const std::string what =
      std::string(c10::toString(dt)) + " D=" + std::to_string(D) +
      (stacked ? " stacked" : "") + (broadcastTables ? " broadcast" : "");
  auto [yq, yk] = fused::rotary(q, k, cos, sin);
  expectClose(yq, rotaryRef(q, cos, sin), dt, what + " q");
  expectClose(yk, rotaryRef(k, cos, sin), dt, what + " k");
  // Laid out as attention reads them: [B, S, H, D] transposed.
  EXPECT_TRUE(yq.transpose(1, 2).is_contiguous()) << what;

  at::Tensor lq = q.detach().clone().requires_grad_(true),
             lk = k.detach().clone().requires_grad_(true);
  at::Tensor dq = at::randn(q.sizes()).to(o), dk = at::randn(k.sizes()).to(o);
  auto [fq, fk] = fused::rotary(lq, lk, cos, sin);
  torch::autograd::backward({fq, fk}, {dq, dk});
  at::Tensor rq = q.to(at::kFloat).requires_grad_(true),
             rk = k.to(at::kFloat).requires_grad_(true);
  torch::autograd::backward({rotaryRef(rq, cos, sin), rotaryRef(rk, cos, sin)},
                            {dq.to(at::kFloat), dk.to(at::kFloat)});
  expectClose(lq.grad(), rq.grad(), dt, what + " d q");
  expectClose(lk.grad(), rk.grad(), dt, what + " d k");
}

} // namespace

TEST(FusedOps, GroupWidthFollowsAlignmentAndLength) {
  using fused::Dtype;
  alignas(16) static char buf[64];
  const void *aligned = buf, *off2 = buf + 2, *off4 = buf + 4;
  EXPECT_EQ(fused::widthFor(Dtype::BFloat16, 64, {aligned}, {128}), 8);
  EXPECT_EQ(fused::widthFor(Dtype::Float, 64, {aligned}, {128}), 4);
  EXPECT_EQ(fused::widthFor(Dtype::BFloat16, 12, {aligned}, {12}), 4);
  EXPECT_EQ(fused::widthFor(Dtype::BFloat16, 7, {aligned}, {7}), 1);
  EXPECT_EQ(fused::widthFor(Dtype::BFloat16, 64, {aligned, off2}, {64}), 1);
  EXPECT_EQ(fused::widthFor(Dtype::BFloat16, 64, {aligned, off4}, {64}), 2);
  EXPECT_EQ(fused::widthFor(Dtype::Half, 64, {aligned}, {66}), 2);
}

TEST(FusedOps, SwiGluMatchesTheOps) {
  for (at::ScalarType dt : kDtypes)
    for (const char *layout : {"contiguous", "stacked", "odd", "shifted"})
      checkSwiGlu(at::TensorOptions().dtype(dt), layout);
}

TEST(FusedOps, RotaryMatchesTheOps) {
  for (at::ScalarType dt : kDtypes)
    for (int64_t D : {16, 6})
      for (bool stacked : {false, true})
        for (bool broadcast : {false, true})
          checkRotary(at::TensorOptions().dtype(dt), D, stacked, broadcast);
}

TEST(FusedOps, RefusesWhatItCannotServe) {
  at::Tensor g = at::randn({3, 8}), u = at::randn({3, 8});
  EXPECT_FALSE(fused::swiGlu(g.to(at::kDouble), u.to(at::kDouble)).defined());
  EXPECT_FALSE(fused::swiGlu(g, u.to(at::kHalf)).defined());
  EXPECT_FALSE(fused::swiGlu(g, at::randn({3, 9})).defined());
  EXPECT_FALSE(fused::swiGlu(g.t(), u.t()).defined()) << "strided last dim";
  at::Tensor q = at::randn({1, 2, 3, 8}), k = at::randn({1, 1, 3, 8});
  auto [c, s] = tables(1, 3, 8, at::TensorOptions());
  EXPECT_TRUE(fused::rotary(q, k, c, s).first.defined());
  EXPECT_FALSE(fused::rotary(q, k, c.to(at::kHalf), s).first.defined());
  EXPECT_FALSE(fused::rotary(q, at::randn({1, 1, 4, 8}), c, s).first.defined());
  EXPECT_FALSE(fused::rotary(at::randn({1, 2, 3, 7}), at::randn({1, 1, 3, 7}),
                             at::randn({1, 1, 3, 7}), at::randn({1, 1, 3, 7}))
                   .first.defined())
      << "odd head dim";
}

namespace {

/// Pairs of every kind realloc copies, and some it does not: column and row
/// slices of a shard, whole vectors, a send buffer's view, odd offsets
/// (narrower units), slices of many tiles, more than one launch's worth,
/// and pairs left to copy_ (3-d, a transposed source) in between.
void checkCopies(at::TensorOptions o) {
  std::vector<at::Tensor> dsts, refs;
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
  auto add = [&](at::Tensor dst, const at::Tensor &src) {
    at::Tensor ref = dst.clone();
    ref.copy_(src);
    refs.push_back(ref);
    dsts.push_back(dst);
    pairs.emplace_back(dst, src);
  };
  at::Tensor shard = at::randn({64, 96}).to(o), out = at::zeros({64, 384}, o);
  for (int t = 0; t < 4; ++t) // Dim1 gather: strided destination rows
    add(out.narrow(1, 96 * t, 96), shard);
  at::Tensor full = at::randn({256, 40}).to(o);
  add(at::zeros({64, 40}, o), full.narrow(0, 64, 64)); // Dim0 slice
  add(at::zeros({40}, o), full[3]);                    // a vector
  at::Tensor buf = at::zeros({64 * 37}, o);
  add(buf.view({64, 37}), full.narrow(1, 1, 37).narrow(0, 0, 64)); // odd
  add(at::zeros({3, 5, 7}, o), at::randn({3, 5, 7}).to(o));        // 3-d: copy_
  add(at::zeros({300, 1000}, o), at::randn({300, 1000}).to(o));    // tiles
  add(at::zeros({16, 16}, o), at::randn({16, 16}).to(o).t());      // copy_
  for (int i = 0; i < 60; ++i) // past one launch's 48 slices
    add(at::zeros({i + 1}, o), at::randn({i + 1}).to(o));
  fused::copySlices(pairs);
  for (size_t i = 0; i < dsts.size(); ++i)
    EXPECT_TRUE(at::equal(dsts[i], refs[i]))
        << "pair " << i << " of " << dsts.size();
}

// A decode step's rotary and cache write in one launch: q as rotary gives
// it, k rotated and v as they are at the slot, and nothing else of the
// cache touched.
void checkRotaryIntoCache(at::TensorOptions o) {
  const int64_t B = 2, H = 4, KV = 2, D = 16, cap = 9;
  at::Tensor y = at::randn({B, 1, (H + 2 * KV) * D}).to(o);
  auto part = [&](int64_t first, int64_t n) {
    return y.narrow(-1, first * D, n * D).view({B, 1, n, D}).transpose(1, 2);
  };
  at::Tensor q = part(0, H), k = part(H, KV), v = part(H + KV, KV);
  auto [cos, sin] = tables(B, 1, D, o);
  at::Tensor keys = at::randn({B, KV, cap, D}).to(o),
             values = at::randn({B, KV, cap, D}).to(o);
  at::Tensor wantKeys = keys.clone(), wantValues = values.clone();
  at::Tensor slot = at::full({1}, int64_t(5), o.dtype(at::kLong));
  wantKeys.index_copy_(2, slot, rotaryRef(k, cos, sin).to(o));
  wantValues.index_copy_(2, slot, v);
  at::NoGradGuard noGrad;
  at::Tensor rq = fused::rotaryIntoCache(q, k, v, cos, sin, keys, values, slot);
  const at::ScalarType dt = o.dtype().toScalarType();
  expectClose(rq, rotaryRef(q, cos, sin), dt, "q");
  expectClose(keys, wantKeys, dt, "keys");
  EXPECT_TRUE(at::equal(values, wantValues)) << "values copied as they are";
  // Only the slot changed.
  for (int64_t t = 0; t < cap; ++t)
    if (t != 5) {
      EXPECT_TRUE(at::equal(keys.select(2, t), wantKeys.select(2, t))) << t;
    }
  EXPECT_FALSE(fused::rotaryIntoCache(q, k, v, cos, sin, keys.narrow(3, 0, 8),
                                      values, slot)
                   .defined())
      << "a cache of another head dim";
}

} // namespace

TEST(FusedOps, RotaryIntoCacheMatchesRotaryAndIndexCopy) {
  for (at::ScalarType dt : kDtypes)
    checkRotaryIntoCache(at::TensorOptions().dtype(dt));
}

TEST(FusedOps, BatchedCopiesMatchCopy) {
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16, at::kByte})
    checkCopies(at::TensorOptions().dtype(dt));
}

// The model takes the fused path on CUDA tensors only, unless
// RLHF_FUSED_KERNELS=cpu (ctest's runtime.fused-model-on-cpu) asks for it
// on the CPU too, or =0 for neither.
TEST(FusedOps, EnabledFollowsTheEnvironment) {
  const char *e = std::getenv("RLHF_FUSED_KERNELS");
  const std::string mode = e ? e : "";
  EXPECT_EQ(fused::enabled(at::zeros({1})), mode == "cpu");
}

// The kernels against LibTorch's ops on the GPU, and against the host
// bodies: forward and backward, each dtype, and a size whose groups exceed
// one grid so the grid-stride loop runs.
TEST(FusedCuda, KernelsMatchTheOpsAndTheHost) {
  if (!torch::cuda::is_available())
    GTEST_SKIP() << "no CUDA device";
  ASSERT_TRUE(fused::enabled(at::zeros({1}, at::kCUDA)))
      << "a CUDA build runs the fused kernels on CUDA tensors";
  for (at::ScalarType dt : kDtypes) {
    const auto o = at::TensorOptions().device(at::kCUDA).dtype(dt);
    for (const char *layout : {"contiguous", "stacked", "odd", "shifted"})
      checkSwiGlu(o, layout);
    for (int64_t D : {128, 64, 6})
      for (bool stacked : {false, true})
        checkRotary(o, D, stacked, /*broadcastTables=*/false);
    checkCopies(o);
    checkRotaryIntoCache(o);
    // The kernels and the host loop run the same bodies.
    at::Tensor g = at::randn({64, 96}).to(o), u = at::randn({64, 96}).to(o);
    expectClose(fused::swiGlu(g, u), fused::swiGlu(g.cpu(), u.cpu()), dt,
                "kernel against host");
  }
  // 65536 x 2304 bf16 elements: 18.9M groups of 8 over 65536 blocks of 256.
  const auto o = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  at::Tensor g = at::randn({65536, 2304}, o), u = at::randn({65536, 2304}, o);
  at::Tensor y = fused::swiGlu(g, u);
  const at::Tensor ref = swiGluRef(g, u);
  const double worst =
      ((y.to(at::kFloat) - ref).abs() - ref.abs() / 256).max().item<double>();
  EXPECT_LE(worst, 1e-6) << "every group of a multi-wave grid is written";
}
