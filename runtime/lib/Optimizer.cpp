//===- Optimizer.cpp - gradient reduction and AdamW ----------------------===//
//
// Gradients summed over data-parallel ranks in dtype buckets (as DDP), or
// reduce-scattered to ZeRO slices, and AdamW over fp32 master weights and
// moments: ATen's fused multi-tensor kernel where it applies.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/LrScheduleNames.h"
#include "rlhf/runtime/Train.h"

#include <torch/torch.h>

#include <cmath>
#include <iterator>

using namespace rlhf;

namespace {

/// The slice [lo, lo + len) of `n` elements that rank `r` of `k` owns under
/// ZeRO, and the padded slice length every rank exchanges.
struct Slice {
  int64_t lo, len, chunk;
};
Slice sliceOf(int64_t n, int r, int k) {
  int64_t chunk = (n + k - 1) / k;
  int64_t lo = std::min(n, r * chunk);
  return {lo, std::min(chunk, n - lo), chunk};
}

/// Runs of consecutive tensors of one dtype, of about `bucketBytes` each:
/// one collective per run instead of one per parameter (as DDP buckets).
template <typename F>
void forEachBucket(const std::vector<at::Tensor> &ts, int64_t bucketBytes,
                   F f) {
  size_t begin = 0;
  int64_t bytes = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (i > begin && ts[i].scalar_type() != ts[begin].scalar_type()) {
      f(begin, i);
      begin = i, bytes = 0;
    }
    bytes += ts[i].numel() * int64_t(ts[i].element_size());
    if (bytes >= bucketBytes) {
      f(begin, i + 1);
      begin = i + 1, bytes = 0;
    }
  }
  if (begin < ts.size())
    f(begin, ts.size());
}

/// Offsets of each tensor's padded ZeRO slice in a row of the bucket
/// [b, e) of tensors of `n(i)` elements, over `k` ranks.
template <typename N>
std::vector<int64_t> sliceOffsets(size_t b, size_t e, int k, N n) {
  std::vector<int64_t> off(e - b + 1, 0);
  for (size_t i = b; i < e; ++i)
    off[i - b + 1] = off[i - b] + sliceOf(n(i), 0, k).chunk;
  return off;
}

/// Matching views of a flat tensor of `n` elements and of `rows`, a
/// [k, chunk] view holding its padded ZeRO slices one per row (padding left
/// out): the full rows, then the remainder. Copying across each pair moves
/// the tensor between the two forms, either way.
std::vector<std::pair<at::Tensor, at::Tensor>>
flatAndRows(const at::Tensor &flat, int64_t n, const at::Tensor &rows) {
  int64_t chunk = rows.size(1), full = n / chunk, rem = n % chunk;
  std::vector<std::pair<at::Tensor, at::Tensor>> views{
      {flat.narrow(0, 0, full * chunk).view({full, chunk}),
       rows.narrow(0, 0, full)}};
  if (rem)
    views.push_back(
        {flat.narrow(0, full * chunk, rem), rows[full].narrow(0, 0, rem)});
  return views;
}

/// Every rank's slice (`mine[i]` this rank's) gathered into `whole[i]`, a
/// flat contiguous tensor.
void gatherSlices(Communicator &c, const std::vector<at::Tensor> &mine,
                  const std::vector<at::Tensor> &whole) {
  const int k = c.size();
  forEachBucket(mine, kGradientBucketBytes, [&](size_t b, size_t e) {
    // This rank's padded slices side by side; the gather stacks the ranks'.
    auto off =
        sliceOffsets(b, e, k, [&](size_t i) { return whole[i].numel(); });
    at::Tensor row = at::zeros({off.back()}, mine[b].options());
    for (size_t i = b; i < e; ++i)
      row.narrow(0, off[i - b], mine[i].numel()).copy_(mine[i].reshape(-1));
    at::Tensor all = c.allGather(row).view({k, off.back()});
    for (size_t i = b; i < e; ++i)
      for (auto &[flat, rows] :
           flatAndRows(whole[i], whole[i].numel(),
                       all.narrow(1, off[i - b], off[i - b + 1] - off[i - b])))
        flat.copy_(rows);
  });
}

} // namespace

namespace {

/// `t` as it travels: in `wire` where given, else as it is.
at::Tensor onWire(const at::Tensor &t, std::optional<at::ScalarType> wire) {
  return wire && t.scalar_type() != *wire ? t.to(*wire) : t;
}

} // namespace

void rlhf::sumGradientsInPlace(Communicator &group,
                               const std::vector<at::Tensor> &grads,
                               std::optional<at::ScalarType> wire,
                               int64_t bucketBytes) {
  forEachBucket(grads, bucketBytes, [&](size_t b, size_t e) {
    std::vector<at::Tensor> flat;
    for (size_t i = b; i < e; ++i)
      flat.push_back(grads[i].reshape(-1));
    at::Tensor sum = onWire(at::cat(flat), wire);
    group.allReduceSum(sum);
    int64_t at = 0;
    for (size_t i = b; i < e; ++i) {
      at::Tensor g = grads[i];
      g.view(-1).copy_(sum.narrow(0, at, g.numel()));
      at += g.numel();
    }
  });
}

std::vector<at::Tensor>
rlhf::reduceGradients(Communicator &group, const std::vector<at::Tensor> &grads,
                      bool zero, int64_t bucketBytes,
                      std::optional<at::ScalarType> wire) {
  std::vector<at::Tensor> out(grads.size());
  if (!zero) {
    for (size_t i = 0; i < grads.size(); ++i)
      out[i] = grads[i].clone();
    sumGradientsInPlace(group, out, wire, bucketBytes);
    return out;
  }
  const int k = group.size(), r = group.rank();
  forEachBucket(grads, bucketBytes, [&](size_t b, size_t e) {
    // Row q holds rank q's padded slice of every gradient of the bucket, so
    // the reduce-scatter leaves each rank the sums of its own slices.
    auto off =
        sliceOffsets(b, e, k, [&](size_t i) { return grads[i].numel(); });
    at::Tensor rows = at::zeros(
        {k, off.back()},
        grads[b].options().dtype(wire.value_or(grads[b].scalar_type())));
    for (size_t i = b; i < e; ++i)
      for (auto &[flat, row] :
           flatAndRows(grads[i].reshape(-1), grads[i].numel(),
                       rows.narrow(1, off[i - b], off[i - b + 1] - off[i - b])))
        row.copy_(flat);
    at::Tensor mine =
        group.reduceScatterSum(rows.view({-1})).to(grads[b].scalar_type());
    for (size_t i = b; i < e; ++i)
      out[i] = mine.narrow(0, off[i - b], sliceOf(grads[i].numel(), r, k).len);
  });
  return out;
}

namespace {

/// AdamW on fp32 tensors `w` in place with fp32 gradients `g` (scaled by
/// `gradScale`). Contiguous tensors of one device take ATen's fused kernel
/// (one multi-tensor pass: on a GPU a handful of launches for the whole model
/// where separate ops took ten per parameter, each reading the state again);
/// any others take the same update as separate ops.
void adamUpdate(const std::vector<at::Tensor> &w,
                const std::vector<at::Tensor> &g,
                const std::vector<at::Tensor> &m1,
                const std::vector<at::Tensor> &m2, const AdamSettings &s,
                int64_t t, double gradScale) {
  std::vector<size_t> fused, single;
  for (size_t i = 0; i < w.size(); ++i) {
    bool ok = w[i].device() == w[0].device() && g[i].device() == w[0].device();
    for (const at::Tensor *x : {&w[i], &g[i], &m1[i], &m2[i]})
      ok = ok && x->is_contiguous() && x->scalar_type() == at::kFloat;
    (ok && s.fused ? fused : single).push_back(i);
  }
  if (!fused.empty()) {
    std::vector<at::Tensor> fw, fg, f1, f2, steps;
    // The kernel reads each tensor's step count (bias corrections) and
    // leaves incrementing it to the caller, as torch.optim does.
    at::Tensor step =
        at::full({int64_t(fused.size())}, double(t), w[fused[0]].options());
    for (size_t k = 0; k < fused.size(); ++k) {
      size_t i = fused[k];
      fw.push_back(w[i]);
      fg.push_back(g[i]);
      f1.push_back(m1[i]);
      f2.push_back(m2[i]);
      steps.push_back(step.select(0, int64_t(k)));
    }
    std::optional<at::Tensor> unscale;
    if (gradScale != 1.0) // the kernel divides the gradients by it
      unscale = at::full({}, 1.0 / gradScale, step.options());
    at::_fused_adamw_(fw, fg, f1, f2, {}, steps, s.lr, s.beta1, s.beta2,
                      s.weightDecay, s.eps, /*amsgrad=*/false,
                      /*maximize=*/false, unscale);
  }
  const double bc1 = 1 - std::pow(s.beta1, double(t)),
               bc2 = 1 - std::pow(s.beta2, double(t));
  for (size_t i : single) {
    at::Tensor gi = gradScale != 1.0 ? g[i] * gradScale : g[i];
    m1[i].mul_(s.beta1).add_(gi, 1 - s.beta1);
    m2[i].mul_(s.beta2).addcmul_(gi, gi, 1 - s.beta2);
    at::Tensor denom = (m2[i] / bc2).sqrt_().add_(s.eps);
    if (s.weightDecay > 0)
      w[i].mul_(1 - s.lr * s.weightDecay);
    w[i].addcdiv_(m1[i], denom, -s.lr / bc1);
  }
}

} // namespace

void Adam::step(ParamMap &params,
                const std::map<std::string, at::Tensor> &grads,
                Communicator *zero, double gradScale) {
  at::NoGradGuard ng;
  if (zero && zero->size() < 2)
    zero = nullptr;
  if (zeroGroup && zeroGroup != zero)
    unshard();
  ++t;
  // Under ZeRO, the updated slices, gathered into the parameters at the end.
  std::vector<at::Tensor> whole, slices;
  // What the update changes (fp32), with its gradient and moments, and the
  // low-precision weights that take the updated fp32 masters.
  std::vector<at::Tensor> ws, gs, m1s, m2s;
  std::vector<std::pair<at::Tensor, at::Tensor>> copyBack;
  for (auto &[name, param] : params) {
    auto git = grads.find(name);
    if (git == grads.end() || !git->second.defined())
      continue;
    at::Tensor p = param, g = git->second.to(at::kFloat);
    at::Tensor &m1 = m[name], &m2 = v[name];
    // Low-precision weights are updated through an fp32 master copy (made
    // from the weights at the first step, as Megatron does), sliced under
    // ZeRO like the moments.
    const bool mixed = param.scalar_type() != at::kFloat;
    at::Tensor *mw = mixed ? &master[name] : nullptr;
    if (zero) {
      if (!param.is_contiguous())
        throw Error("ZeRO: parameter '" + name + "' is not contiguous");
      Slice sl = sliceOf(param.numel(), zero->rank(), zero->size());
      if (g.numel() != sl.len)
        throw Error("ZeRO: the gradient of '" + name +
                    "' is not this rank's slice");
      p = param.view({-1}).narrow(0, sl.lo, sl.len);
      if (m1.defined() && !shapes.count(name)) { // whole: keep this slice
        for (at::Tensor *t : {&m1, &m2, mw})
          if (t && t->defined())
            *t = t->reshape({-1}).narrow(0, sl.lo, sl.len).clone();
      }
      shapes[name] = param.sizes().vec();
    }
    if (mw && !mw->defined())
      *mw = p.to(at::kFloat);
    at::Tensor w = mw ? *mw : p; // what the update changes, in fp32
    if (!m1.defined()) {
      m1 = at::zeros_like(w);
      m2 = at::zeros_like(w);
    }
    ws.push_back(w);
    gs.push_back(g);
    m1s.push_back(m1);
    m2s.push_back(m2);
    if (mw)
      copyBack.emplace_back(p, w);
    if (zero) {
      whole.push_back(param.view({-1}));
      slices.push_back(p);
    }
  }
  if (!ws.empty())
    adamUpdate(ws, gs, m1s, m2s, s, t, gradScale);
  for (auto &[p, w] : copyBack)
    p.copy_(w);
  if (zero) // every member's updated slices, into the whole parameters
    gatherSlices(*zero, slices, whole);
  zeroGroup = zero;
}

void Adam::unshard() {
  if (!zeroGroup)
    return;
  at::NoGradGuard ng;
  // Sorted by name, so every member gathers the same tensors in turn.
  std::vector<at::Tensor *> moms;
  std::vector<const std::vector<int64_t> *> shapeOf;
  std::vector<at::Tensor> slices, whole;
  for (auto &[name, shape] : shapes) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<at::Tensor *> states{&m[name], &v[name]};
    if (auto it = master.find(name); it != master.end())
      states.push_back(&it->second);
    for (at::Tensor *mom : states) {
      moms.push_back(mom);
      shapeOf.push_back(&shape);
      slices.push_back(*mom);
      whole.push_back(at::empty({n}, mom->options()));
    }
  }
  gatherSlices(*zeroGroup, slices, whole);
  for (size_t i = 0; i < moms.size(); ++i)
    *moms[i] = whole[i].view(*shapeOf[i]);
  shapes.clear();
  zeroGroup = nullptr;
}

double LrSchedule::at(double lr, int64_t step) const {
  if (warmupSteps > 0 && step < warmupSteps)
    return lr * double(std::max<int64_t>(step, 0)) / double(warmupSteps);
  if (kind == Kind::Constant)
    return lr;
  // transformers' progress, (step - warmup) / max(1, total - warmup),
  // held at 1 past the horizon.
  double progress =
      std::min(1.0, double(step - warmupSteps) /
                        double(std::max<int64_t>(1, decaySteps - warmupSteps)));
  double factor = kind == Kind::Linear
                      ? 1.0 - progress
                      : 0.5 * (1.0 + std::cos(M_PI * progress));
  return minLr + (lr - minLr) * factor;
}

std::optional<LrSchedule::Kind> LrSchedule::parse(const std::string &name) {
  static_assert(std::size(kLrScheduleNames) == size_t(Kind::Cosine) + 1);
  for (size_t i = 0; i < std::size(kLrScheduleNames); ++i)
    if (name == kLrScheduleNames[i])
      return Kind(i);
  return std::nullopt;
}
