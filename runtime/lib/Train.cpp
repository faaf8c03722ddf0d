//===- Train.cpp - losses and the train step -----------------------------===//

#include "rlhf/runtime/Train.h"
#include "Pipeline.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/FnProgram.h"

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <tuple>

using namespace rlhf;

at::Tensor rlhf::tokenLogprobs(const at::Tensor &logits,
                               const at::Tensor &seq) {
  int64_t S = seq.size(1);
  at::Tensor lp = at::log_softmax(logits.narrow(1, 0, S - 1), -1);
  return lp.gather(-1, seq.narrow(1, 1, S - 1).unsqueeze(-1)).squeeze(-1);
}

namespace {

/// `f` applied to every defined tensor of `b`.
template <typename F> TrainBatch mapBatch(const TrainBatch &b, F f) {
  TrainBatch r = b;
  for (auto *ts : {&r.inputs, &r.masks})
    for (at::Tensor &t : *ts)
      if (t.defined())
        t = f(t);
  if (r.rowWeights.defined())
    r.rowWeights = f(r.rowWeights);
  return r;
}

TrainBatch rows(const TrainBatch &b, int64_t lo, int64_t n) {
  return mapBatch(b, [&](const at::Tensor &t) { return t.narrow(0, lo, n); });
}

FnInputs fnInputs(const TrainBatch &b, const TrainOptions &o) {
  return {b.inputs, b.masks, o.pad, b.rowWeights, o.coefs};
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

/// The token inputs `loss` runs the model on; with pipeline stages, one.
std::vector<int64_t> stagedInputs(const LlamaModel &model,
                                  const FnProgram &loss) {
  std::vector<int64_t> in = loss.modelInputs();
  if (model.stages() > 1 && in.size() != 1)
    throw Error("loss '" + loss.name() + "' runs the model on " +
                std::to_string(in.size()) +
                " token inputs; with pipeline stages a loss may run it on one "
                "only; train it with pp = 1");
  return in;
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

/// What a loss read of the model on one micro-batch, kept so that
/// evaluating it again (under other row weights) runs no forward again.
struct ModelReads {
  std::map<int64_t, at::Tensor> outputs; ///< per token input
  std::map<std::tuple<int64_t, bool, bool>, std::pair<at::Tensor, at::Tensor>>
      stats; ///< per (token input, logprobs, entropy)
};

/// The loss of one micro-batch, normalised over the minibatch; with
/// pipeline stages, from the last stage's output `stageOut`: an lm head's
/// hidden states (stageForward without its head), a value head's values.
/// Its value and metrics (the outputs after the loss) are added to `sums`,
/// on the device: read once a minibatch, not a sync per micro-batch. With
/// `reads` (forward only), the model's outputs come from there when an
/// earlier evaluation read them.
at::Tensor microLoss(LlamaModel &model, const TrainBatch &b,
                     const TrainOptions &o, const std::vector<double> &denoms,
                     const at::Tensor *stageOut, std::vector<at::Tensor> &sums,
                     ModelReads *reads = nullptr) {
  const bool lmHead = !model.config().shape.valueHead;
  FnModel out = [&](int64_t in, const at::Tensor &tokens) {
    if (reads && reads->outputs.count(in))
      return reads->outputs.at(in);
    at::Tensor y = !stageOut ? model.forward(tokens)
                   : lmHead  ? model.headOf(*stageOut)
                             : *stageOut;
    if (reads)
      reads->outputs[in] = y;
    return y;
  };
  // Log-probs and entropies come per token, never through [B, S, V] logits:
  // the fused head unsharded and on a pipeline's last stage, the sharded
  // vocabulary under tp, gathered statistics under sp.
  FnTokenStat stat = [&](int64_t in, const at::Tensor &tokens, bool logprobs,
                         bool entropy, bool entropyGrad) {
    const auto key = std::make_tuple(in, logprobs, entropy);
    if (reads && reads->stats.count(key))
      return reads->stats.at(key);
    TokenStats r =
        stageOut
            ? model.headStats(*stageOut, tokens, logprobs, entropy, entropyGrad)
            : model.tokenStats(tokens, logprobs, entropy, entropyGrad);
    if (reads)
      reads->stats[key] = std::pair(r.logprobs, r.entropy);
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

/// The loss, then its metrics, from the micro-batch sums `summed` (empty
/// off a pipeline's last stage), summed over dp ranks and pipeline stages:
/// every rank of the call gets the minibatch's values.
std::vector<double> minibatchValues(LlamaModel &model, const TrainOptions &o,
                                    const std::vector<at::Tensor> &summed) {
  std::vector<double> v(o.loss->outputNames().size(), 0.0);
  for (size_t k = 0; k < summed.size(); ++k)
    v.at(k) = summed[k].item<double>();
  at::Tensor l = at::tensor(v, at::kDouble);
  if (o.dp)
    o.dp->allReduceSum(l);
  if (model.stages() > 1) // only the last stage saw the loss
    model.ppComm()->allReduceSum(l);
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = l[int64_t(k)].item<double>();
  return v;
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
      e.main = at::empty(p.sizes(), p.options().dtype(at::kFloat));
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

  /// Before a minibatch: the first gradient is then copied in, not added
  /// to zeros (a pass over the fp32 buffer less, and no fill).
  void zero() {
    for (auto &[n, e] : entries)
      e.touched = false;
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
      if (e.touched)
        e.main.add_(g);
      else
        e.main.copy_(g);
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
  const std::vector<int64_t> modelInputs = stagedInputs(model, *o.loss);
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
    if (model.stages() > 1) {
      // Every stage runs its part, in 1F1B order; the last the loss.
      auto microOf = [&](int64_t u) {
        return rows(mini, u * perMicro, perMicro);
      };
      const int64_t in = modelInputs[0];
      runPipeline(
          model,
          (o.sequentialPipeline ? sequentialSchedule : oneFOneB)(
              model.stage(), model.stages(), o.microBatches),
          /*head=*/model.config().shape.valueHead,
          [&](int64_t u) {
            return microOf(u).inputs[size_t(in)].to(at::kLong);
          },
          [&](int64_t u, const at::Tensor &out) {
            at::Tensor stageOut = out;
            microLoss(model, microOf(u), o, denoms, &stageOut, summed)
                .backward();
          });
    } else {
      for (int64_t u = 0; u < o.microBatches; ++u)
        microLoss(model, rows(mini, u * perMicro, perMicro), o, denoms, nullptr,
                  summed)
            .backward();
    }
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
    std::vector<double> v = minibatchValues(model, o, summed);
    stats.loss += v[0] / double(o.minibatches);
    stats.metrics.resize(v.size() - 1, 0.0);
    for (size_t k = 1; k < v.size(); ++k)
      stats.metrics[k - 1] += v[k] / double(o.minibatches);
    stats.gradNorm = norm;
    stats.gradNormMean += norm / double(o.minibatches);
  }
  if (!o.keepGradients)
    for (auto &[n, p] : model.params())
      p.mutable_grad().reset();
  return stats;
}

std::vector<TrainStats>
rlhf::evalLosses(LlamaModel &model, const TrainBatch &hostBatch,
                 const TrainOptions &o,
                 const std::vector<at::Tensor> &weightSets) {
  at::NoGradGuard noGrad;
  const TrainBatch batch = mapBatch(
      hostBatch, [&](const at::Tensor &t) { return t.to(model.device()); });
  const int64_t N = batchRows(batch, o);
  const std::vector<int64_t> modelInputs = stagedInputs(model, *o.loss);
  // As many micro-batches as rows at most: a short batch runs them whole.
  const int64_t micro = std::min<int64_t>(std::max<int64_t>(1, o.microBatches),
                                          std::max<int64_t>(1, N));
  // Each weighting's batch, and its denominators over every dp rank.
  std::vector<TrainBatch> sets;
  std::vector<std::vector<double>> denoms;
  for (const at::Tensor &w : weightSets) {
    TrainBatch b = batch;
    b.rowWeights = w.defined() ? w.to(model.device()) : w;
    denoms.push_back(denominators(b, o));
    sets.push_back(std::move(b));
  }
  std::vector<std::vector<at::Tensor>> summed(sets.size());
  for (int64_t u = 0; u < micro; ++u) {
    const int64_t lo = N * u / micro, hi = N * (u + 1) / micro;
    ModelReads reads;
    at::Tensor stageOut;
    if (model.stages() > 1) {
      // Each stage takes the micro-batch from the one before and passes it
      // on; the last computes the loss (a value head's stage output is its
      // values, an lm head's its normed hidden states).
      stageOut = model
                     .stageForward(rows(batch, lo, hi - lo)
                                       .inputs[size_t(modelInputs[0])]
                                       .to(at::kLong),
                                   /*head=*/model.config().shape.valueHead)
                     .output;
      if (!model.lastStage())
        continue;
    }
    for (size_t k = 0; k < sets.size(); ++k)
      microLoss(model, rows(sets[k], lo, hi - lo), o, denoms[k],
                stageOut.defined() ? &stageOut : nullptr, summed[k], &reads);
  }
  std::vector<TrainStats> out;
  for (size_t k = 0; k < sets.size(); ++k) {
    std::vector<double> v = minibatchValues(model, o, summed[k]);
    TrainStats stats;
    stats.loss = v[0];
    stats.metrics.assign(v.begin() + 1, v.end());
    out.push_back(std::move(stats));
  }
  return out;
}

TrainStats rlhf::evalLoss(LlamaModel &model, const TrainBatch &batch,
                          const TrainOptions &o) {
  return evalLosses(model, batch, o, {batch.rowWeights}).front();
}
