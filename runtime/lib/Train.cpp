//===- Train.cpp - losses, Adam and the train step ------------------------===//

#include "rlhf/runtime/Train.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/FnProgram.h"

#include <torch/torch.h>

#include <cmath>

using namespace rlhf;

at::Tensor rlhf::tokenLogprobs(const at::Tensor &logits,
                               const at::Tensor &seq) {
  int64_t S = seq.size(1);
  at::Tensor lp = at::log_softmax(logits.narrow(1, 0, S - 1), -1);
  return lp.gather(-1, seq.narrow(1, 1, S - 1).unsqueeze(-1)).squeeze(-1);
}

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

namespace {

/// `f` applied to every defined tensor of `b`.
template <typename F> TrainBatch mapBatch(const TrainBatch &b, F f) {
  TrainBatch r = b;
  for (auto *ts : {&r.inputs, &r.masks})
    for (at::Tensor &t : *ts)
      if (t.defined())
        t = f(t);
  return r;
}

TrainBatch rows(const TrainBatch &b, int64_t lo, int64_t n) {
  return mapBatch(b, [&](const at::Tensor &t) { return t.narrow(0, lo, n); });
}

FnInputs fnInputs(const TrainBatch &b, const TrainOptions &o) {
  return {b.inputs, b.masks, o.pad};
}

/// The rows of the batch, checked before it is split.
int64_t batchRows(const TrainBatch &b, const TrainOptions &o) {
  if (!o.loss)
    throw Error("a train step needs a loss function");
  const FnProgram &f = *o.loss;
  if (f.mode() != FnProgram::Mode::Loss)
    throw Error("fn '" + f.name() + "' is a host function, not a loss");
  if (int64_t(b.inputs.size()) != f.numInputs())
    throw Error("fn '" + f.name() + "' takes " + std::to_string(f.numInputs()) +
                " inputs, the batch has " + std::to_string(b.inputs.size()));
  int64_t n = f.numInputs() ? b.inputs[0].size(0) : 0;
  for (size_t i = 0; i < b.inputs.size(); ++i)
    if (!b.inputs[i].defined() || b.inputs[i].dim() == 0 ||
        b.inputs[i].size(0) != n)
      throw Error("fn '" + f.name() + "': input " + std::to_string(i) +
                  " does not have the " + std::to_string(n) +
                  " rows of input 0");
  if (b.masks.size() > b.inputs.size())
    throw Error("fn '" + f.name() + "': more masks than inputs");
  return n;
}

/// The denominators of the loss's batch reductions over the minibatch
/// `mini` on every dp rank.
std::vector<double> denominators(const TrainBatch &mini,
                                 const TrainOptions &o) {
  std::vector<double> d = o.loss->localDenominators(fnInputs(mini, o));
  if (o.dp && !d.empty()) {
    at::Tensor t = at::tensor(d, at::kDouble);
    o.dp->allReduceSum(t);
    for (size_t i = 0; i < d.size(); ++i)
      d[i] = t[int64_t(i)].item<double>();
  }
  return d;
}

/// The loss of one micro-batch, normalised over the minibatch; with
/// pipeline stages, from the last stage's output `stageOut`: an lm head's
/// hidden states (stageForward without its head), a value head's values.
/// Its value and metrics (the outputs after the loss) are added to `sums`,
/// on the device: read once a minibatch, not a sync per micro-batch.
at::Tensor microLoss(LlamaModel &model, const TrainBatch &b,
                     const TrainOptions &o, const std::vector<double> &denoms,
                     const at::Tensor *stageOut,
                     std::vector<at::Tensor> &sums) {
  const bool lmHead = !model.config().shape.valueHead;
  FnModel out = [&](int64_t, const at::Tensor &tokens) {
    if (!stageOut)
      return model.forward(tokens);
    return lmHead ? model.headOf(*stageOut) : *stageOut;
  };
  // Log-probs and entropies come per token, never through [B, S, V] logits:
  // the fused head unsharded and on a pipeline's last stage, the sharded
  // vocabulary under tp, gathered statistics under sp.
  FnTokenStat stat = [&](int64_t, const at::Tensor &tokens, bool logprobs,
                         bool entropy) {
    TokenStats r = stageOut
                       ? model.headStats(*stageOut, tokens, logprobs, entropy)
                       : model.tokenStats(tokens, logprobs, entropy);
    return std::pair(r.logprobs, r.entropy);
  };
  std::vector<at::Tensor> v = o.loss->evaluate(
      fnInputs(b, o), &out, &denoms, stageOut && !lmHead ? nullptr : &stat);
  sums.resize(v.size());
  for (size_t k = 0; k < v.size(); ++k) {
    at::Tensor x = v[k].detach().to(at::kDouble);
    sums[k] = sums[k].defined() ? sums[k] + x : x;
  }
  return v[0];
}

/// Gradients of low-precision weights, accumulated in fp32 over the
/// micro-batches of a minibatch (Megatron's main_grad). Each parameter's
/// gradient is added as soon as autograd has accumulated it and then freed,
/// so a call holds 4 bytes per parameter of gradients, not 4 + 2: what the
/// plans count. fp32 weights accumulate in their own .grad.
class MainGrads {
public:
  explicit MainGrads(ParamMap &params) {
    for (auto &[n, p] : params) {
      if (p.scalar_type() == at::kFloat || !p.requires_grad())
        continue;
      Entry &e = entries[n];
      e.param = p;
      e.main = at::zeros(p.sizes(), p.options().dtype(at::kFloat));
      torch::autograd::impl::set_post_acc_grad_hooks(p,
                                                     std::make_unique<Fold>(e));
    }
  }
  ~MainGrads() {
    for (auto &[n, e] : entries)
      torch::autograd::impl::set_post_acc_grad_hooks(e.param, nullptr);
  }
  MainGrads(const MainGrads &) = delete;
  MainGrads &operator=(const MainGrads &) = delete;

  /// Before a minibatch.
  void zero() {
    for (auto &[n, e] : entries) {
      e.main.zero_();
      e.touched = false;
    }
  }
  /// The accumulated gradient of `name`: undefined if it has none (or is
  /// not a low-precision weight).
  at::Tensor of(const std::string &name) const {
    auto it = entries.find(name);
    return it != entries.end() && it->second.touched ? it->second.main
                                                     : at::Tensor();
  }
  bool holds(const std::string &name) const { return entries.count(name); }

private:
  struct Entry {
    at::Tensor param, main;
    bool touched = false;
  };
  struct Fold : torch::autograd::PostAccumulateGradHook {
    explicit Fold(Entry &e) : e(e) {}
    void operator()(const torch::autograd::Variable &p) override {
      at::Tensor &g = p.mutable_grad();
      if (!g.defined())
        return;
      at::NoGradGuard ng;
      e.main.add_(g);
      e.touched = true;
      g.reset();
    }
    Entry &e;
  };
  std::map<std::string, Entry> entries;
};

} // namespace

TrainStats rlhf::trainStep(LlamaModel &model, Adam &opt,
                           const TrainBatch &hostBatch, const TrainOptions &o) {
  // The batch comes from the executor's host values; the losses run where
  // the model is.
  const TrainBatch batch = mapBatch(
      hostBatch, [&](const at::Tensor &t) { return t.to(model.device()); });
  const int64_t N = batchRows(batch, o);
  const FnProgram &fn = *o.loss;
  std::vector<int64_t> modelInputs = fn.modelInputs();
  if (model.stages() > 1 && modelInputs.size() != 1)
    throw Error("loss '" + fn.name() + "' runs the model on " +
                std::to_string(modelInputs.size()) +
                " token inputs; with pipeline stages a loss may run it on one "
                "only; train it with pp = 1");
  if (o.minibatches < 1 || N % o.minibatches)
    throw Error("batch of " + std::to_string(N) + " rows does not split into " +
                std::to_string(o.minibatches) + " minibatches");
  const int64_t perMini = N / o.minibatches;
  if (o.microBatches < 1 || perMini % o.microBatches)
    throw Error("minibatch of " + std::to_string(perMini) +
                " rows does not split into " + std::to_string(o.microBatches) +
                " micro-batches");
  const int64_t perMicro = perMini / o.microBatches;
  const int tpSize = model.tpSize();
  // Weights are replicated over dp and sp: their gradients are summed, and
  // ZeRO slices, over both.
  const bool spFirst = model.spSize() > 1 && !o.replicas;
  Communicator *gradGroup = o.replicas ? o.replicas : o.dp;
  Communicator *zero =
      o.zero && gradGroup && gradGroup->size() > 1 ? gradGroup : nullptr;
  model.setRecompute(o.recompute);
  MainGrads mainGrads(model.params());
  // Gradients travel in the weights' dtype, as the plans price them.
  const at::ScalarType wire =
      model.params().empty() ? at::kFloat
                             : model.params().begin()->second.scalar_type();
  TrainStats stats;
  for (int64_t mb = 0; mb < o.minibatches; ++mb) {
    TrainBatch mini = rows(batch, mb * perMini, perMini);
    // The loss normalises itself by its reductions' denominators over
    // every dp rank.
    std::vector<double> denoms = denominators(mini, o);
    for (auto &[n, p] : model.params())
      if (p.grad().defined())
        p.mutable_grad().zero_();
    mainGrads.zero();
    std::vector<at::Tensor> summed; // the loss, then its metrics
    for (int64_t u = 0; u < o.microBatches; ++u) {
      TrainBatch micro = rows(mini, u * perMicro, perMicro);
      if (model.stages() > 1) {
        // Every stage runs its part; the last computes the loss.
        StageActivations acts = model.stageForward(
            micro.inputs[size_t(modelInputs[0])].to(at::kLong),
            /*head=*/model.config().shape.valueHead);
        if (model.lastStage()) {
          microLoss(model, micro, o, denoms, &acts.output, summed).backward();
        }
        model.stageBackward(acts);
        continue;
      }
      microLoss(model, micro, o, denoms, nullptr, summed).backward();
    }
    double total = 0; // stays 0 off a pipeline's last stage
    std::vector<double> metrics(fn.outputNames().size() - 1, 0.0);
    for (size_t k = 0; k < summed.size(); ++k)
      (k ? metrics.at(k - 1) : total) = summed[k].item<double>();
    // Sum gradients over dp (under ZeRO, each rank only its slices); global
    // norm over the whole model.
    std::vector<const ParamSpec *> specs;
    std::vector<at::Tensor> local;
    std::vector<ParamSpec> all = llamaParams(model.config().shape);
    for (const ParamSpec &spec : all) {
      auto it = model.params().find(spec.name);
      if (it == model.params().end())
        continue;
      at::Tensor g = mainGrads.holds(spec.name) ? mainGrads.of(spec.name)
                                                : it->second.grad().detach();
      if (!g.defined())
        continue;
      specs.push_back(&spec);
      local.push_back(g);
    }
    // Each sp rank's backward gave only its positions' share, so sp sums
    // too. (The loss's denominators stay over dp: every sp rank evaluated
    // the same rows.) Sums are taken in place: the accumulators are ours.
    if (spFirst)
      sumGradientsInPlace(*model.spComm(), local, wire);
    std::vector<at::Tensor> reduced = local;
    if (zero)
      reduced = reduceGradients(*zero, local, /*zero=*/true,
                                kGradientBucketBytes, wire);
    else if (gradGroup)
      sumGradientsInPlace(*gradGroup, local, wire);
    std::map<std::string, at::Tensor> grads;
    std::vector<at::Tensor> byShard[2]; // [sharded, replicated]
    for (size_t i = 0; i < specs.size(); ++i) {
      byShard[specs[i]->shard == Shard::Replicated ? 1 : 0].push_back(
          reduced[i]);
      grads[specs[i]->name] = reduced[i];
    }
    // Norms in the gradients' own dtype (a double copy would hold the
    // largest gradient, the embedding's, twice again; clipping needs no
    // more than fp32), in one multi-tensor pass, squared and summed in
    // double on the device: one host read for the model, not one sync per
    // parameter.
    at::Tensor sq = at::zeros({2}, at::kDouble);
    for (int k = 0; k < 2; ++k) {
      if (byShard[k].empty())
        continue;
      std::vector<at::Tensor> norms = at::_foreach_norm(byShard[k], 2);
      for (at::Tensor &n : norms)
        n = n.to(at::kDouble);
      sq[k] = at::stack(norms).square().sum().item<double>();
    }
    if (zero) // the slices partition every parameter
      zero->allReduceSum(sq);
    double sharded = sq[0].item<double>(), replicated = sq[1].item<double>();
    if (tpSize > 1) {
      at::Tensor s = at::full({1}, sharded, at::kDouble);
      model.tpComm()->allReduceSum(s);
      sharded = s.item<double>();
    }
    double squares = sharded + replicated;
    if (model.stages() > 1) { // stages hold disjoint parameters
      at::Tensor s = at::full({1}, squares, at::kDouble);
      model.ppComm()->allReduceSum(s);
      squares = s.item<double>();
    }
    double norm = std::sqrt(squares);
    double clip = opt.settings().gradClip;
    double scale = clip > 0 && norm > clip ? clip / (norm + 1e-6) : 1.0;
    if (o.keepGradients && scale != 1.0) // Adam leaves them scaled
      for (auto &[n, g] : grads)
        g = g.clone();
    opt.step(model.params(), grads, zero, scale);
    // The loss, then the metrics: micro-batch sums, summed over ranks.
    std::vector<double> sums{total};
    sums.insert(sums.end(), metrics.begin(), metrics.end());
    at::Tensor l = at::tensor(sums, at::kDouble);
    if (o.dp)
      o.dp->allReduceSum(l);
    if (model.stages() > 1) // only the last stage saw the loss
      model.ppComm()->allReduceSum(l);
    stats.loss += l[0].item<double>() / double(o.minibatches);
    stats.metrics.resize(metrics.size(), 0.0);
    for (size_t k = 0; k < metrics.size(); ++k)
      stats.metrics[k] +=
          l[int64_t(k + 1)].item<double>() / double(o.minibatches);
    stats.gradNorm = norm;
  }
  if (!o.keepGradients)
    for (auto &[n, p] : model.params())
      p.mutable_grad().reset();
  return stats;
}
