//===- ProgramCalls.cpp - model calls, moves and host functions -----------===//
//
// The rlhf_program.h entry points a step is made of: generate, inference and
// train on a model's layout; reallocations, offloads and loads of its
// parameters; transfers of batch values; the host functions written in C++
// (exact_match, script_reward) and EMA. Functions written in the language
// run through ProgramFns.cpp.
//
//===----------------------------------------------------------------------===//

#include "ProgramSteps.h"

#include <cmath>

using namespace rlhf;
using namespace rlhf::exec;

rlhf_value *rlhf::exec::trainCall(rlhf_prog *p, int64_t mi,
                                  const FnProgram &loss, int64_t nin,
                                  rlhf_value *const *ins, const int64_t *lay,
                                  int64_t minibatches, int64_t epochs,
                                  const char *settings, const char *label) {
  ModelState &m = modelAt(p, mi);
  if (!m.trainable)
    throw Error("model '" + m.name + "' is not trainable");
  // Rows and groups as the call runs; the weights' layout counts sp as dp.
  Layout l = rowsLayout(lay), w = layoutFrom(lay);
  Settings s(settings);
  // `frozen_steps = K`: the model stays as it started for K steps (a critic
  // warms up meanwhile). Every rank skips alike, collectives too.
  const int64_t frozen = int64_t(s.get("frozen_steps", 0.0));
  if (p->stepIndex < frozen) {
    // Checkpoints hold it still, for --resume to find.
    m.changed = true;
    // Its record as a call's, of zeros; nothing is logged.
    std::map<std::string, rlhf_value *> fields;
    for (size_t k = 0; k < loss.outputNames().size(); ++k)
      fields[k ? loss.outputNames()[k] : "loss"] = tensorValue(
          p, at::zeros({}, at::kFloat), at::Tensor(), 1, std::nullopt);
    return recordValue(p, std::move(fields));
  }
  TrainOptions o;
  o.loss = &loss;
  o.pad = p->tokenizer->pad();
  o.minibatches = minibatches;
  o.recompute = s.get("recompute", 0.0) != 0.0;
  o.zero = s.get("zero", 0.0) != 0.0;
  o.coefs = coefsAt(p, loss);
  // Adam moments follow the parameters when the train layout changed
  // (collective, so every rank takes part).
  moveMoments(p, m, w);
  // The iteration's rate, the same for each of its optimizer steps; the
  // schedule counts the iterations the model trains, so a warmup starts
  // when the model does.
  const bool scheduled = m.adam.schedule.active();
  const double lr = m.adam.schedule.at(m.adam.lr, p->stepIndex + 1 - frozen);
  if (scheduled)
    m.opt->setLearningRate(lr);
  // The loss's metrics (its outputs after the loss), by name.
  std::vector<double> fnMetrics;
  double gradNorm = 0;
  const size_t numMetrics = loss.outputNames().size() - 1;
  double lossValue = timed(p, label, {"call", {l}}, [&] {
    std::vector<at::Tensor> x(static_cast<size_t>(nin)),
        masks(static_cast<size_t>(nin));
    for (int64_t i = 0; i < nin; ++i)
      x[size_t(i)] = trainRows(p, ins[i], l, minibatches, &masks[size_t(i)]);
    ParallelGroups &g = callGroups(p, lay);
    if (!g.member)
      return 0.0;
    TrainBatch b{x, masks};
    o.microBatches = std::max<int64_t>(1, lay[4]);
    if (const char *v = std::getenv("RLHF_PIPELINE_SCHEDULE"))
      o.sequentialPipeline = std::string(v) == "sequential";
    o.dp = g.dp.get();
    if (lay[5] > 1)
      o.replicas = p->groupsOf(w).dp.get();
    for (auto &[n, t] : m.params)
      t = t.detach().requires_grad_(true);
    LlamaModel model = makeModel(p, m, lay);
    model.setTemperature(s.get("temperature", 1.0));
    double total = 0;
    for (int64_t e = 0; e < epochs; ++e) {
      TrainStats st = trainStep(model, *m.opt, b, o);
      total += st.loss;
      gradNorm += st.gradNormMean / double(std::max<int64_t>(1, epochs));
      fnMetrics.resize(st.metrics.size(), 0.0);
      for (size_t k = 0; k < st.metrics.size(); ++k)
        fnMetrics[k] += st.metrics[k] / double(std::max<int64_t>(1, epochs));
    }
    m.params = model.params();
    for (auto &[n, t] : m.params)
      t = t.detach();
    return total / double(std::max<int64_t>(1, epochs));
  });
  m.changed = true;
  ++m.trainCalls;
  bool member = p->groupsOf(l).member;
  // Weights a non-finite loss has stepped are lost; stop before a
  // checkpoint saves them (Megatron stops on a NaN loss too).
  if (member && !std::isfinite(lossValue))
    throw Error("the loss of '" + m.name + "', " + loss.describe() + ", is " +
                (std::isnan(lossValue) ? "nan" : "infinite") + " at step " +
                std::to_string(p->stepIndex + 1) +
                ", and its weights have taken the step: check the loss's and "
                "the advantages' inputs (a log of a non-positive number, a "
                "division by zero) or lower the learning rate; checkpoints "
                "saved before this step hold finite weights to --resume "
                "from");
  p->record("loss/" + m.name, lossValue, member);
  p->record("grad_norm/" + m.name, gradNorm, member);
  if (scheduled)
    p->record("lr/" + m.name, lr, member);
  recordCoefs(p, loss, o.coefs, "/" + m.name, member);
  std::map<std::string, rlhf_value *> fields;
  auto scalar = [&](double v) {
    return tensorValue(p, at::full({}, v, at::kFloat), at::Tensor(), 1,
                       std::nullopt);
  };
  fields["loss"] = scalar(lossValue);
  fnMetrics.resize(numMetrics, 0.0); // ranks outside the layout
  for (size_t k = 0; k < numMetrics; ++k) {
    const std::string &name = loss.outputNames()[k + 1];
    noteMeasured(p, loss, name, p->metricCursor, nin ? ins[0]->rows : 0);
    p->record(name + "/" + m.name, fnMetrics[k], member);
    fields[name] = scalar(fnMetrics[k]);
  }
  return recordValue(p, std::move(fields));
}

extern "C" {

void rlhf_realloc(rlhf_prog *p, int64_t mi, const int64_t *from,
                  const int64_t *to) {
  guarded(p, "realloc", [&] {
    ModelState &m = modelAt(p, mi);
    Layout f = layoutFrom(from), t = layoutFrom(to);
    if (m.offloaded)
      throw Error("the plan reallocates '" + m.name +
                  "', which rests in host memory; offloaded models keep "
                  "their call's layout");
    if (!sameLayout(m.layout, f))
      throw Error("the plan reallocates '" + m.name + "' from " + layoutStr(f) +
                  " but it is laid out as " + layoutStr(m.layout));
    timed(p, "realloc " + m.name, {"realloc", {f, t}}, [&] {
      m.params = reallocate(m.cfg, std::move(m.params), f, t, *p->world,
                            nullptr, p->weightOpts());
      if (!m.master.empty())
        m.master = reallocate(m.cfg, std::move(m.master), f, t, *p->world,
                              nullptr, p->fp32Opts());
      return 0;
    });
    m.layout = t;
    p->groupsOf(t);
    return 0;
  });
}

/// Checks that `m` may rest in host memory in layout `l`.
void checkOffloadable(const ModelState &m, const Layout &l, const char *what) {
  if (m.trainable)
    throw Error(
        std::string("the plan ") + what + " '" + m.name +
        "', which is trainable; only frozen models rest in host memory");
  if (!sameLayout(m.layout, l))
    throw Error(std::string("the plan ") + what + " '" + m.name + "' as " +
                layoutStr(l) + " but it is laid out as " + layoutStr(m.layout));
}

void rlhf_offload(rlhf_prog *p, int64_t mi, const int64_t *lay) {
  guarded(p, "offload", [&] {
    ModelState &m = modelAt(p, mi);
    checkOffloadable(m, layoutFrom(lay), "offloads");
    if (m.offloaded)
      return 0;
    // Frozen weights never change, so the host copy is made once.
    if (m.host.empty())
      for (auto &[n, t] : m.params) {
        m.workDevice = t.device();
        auto opts = t.options().device(at::kCPU).pinned_memory(t.is_cuda());
        m.host[n] = at::empty(t.sizes(), opts).copy_(t);
      }
    for (auto &[n, t] : m.params)
      t = at::Tensor(); // frees the working copy
    m.offloaded = true;
    return 0;
  });
}

void rlhf_onload(rlhf_prog *p, int64_t mi, const int64_t *lay) {
  guarded(p, "onload", [&] {
    ModelState &m = modelAt(p, mi);
    checkOffloadable(m, layoutFrom(lay), "loads");
    if (!m.offloaded)
      return 0;
    timed(p, "onload " + m.name, {"load", {layoutFrom(lay)}}, [&] {
      m.params = toDevice(m.host, m.workDevice, std::nullopt, /*copy=*/true);
      return 0;
    });
    m.offloaded = false;
    return 0;
  });
}

rlhf_value *rlhf_transfer(rlhf_prog *p, rlhf_value *v, const int64_t *to) {
  return guarded(p, "transfer", [&] {
    Layout l = rowsLayout(to);
    TraceOn on{"transfer", {l}};
    if (v->layout)
      on.layouts.push_back(*v->layout);
    return timed(p, "transfer", on, [&] { return relayout(p, v, l); });
  });
}

rlhf_value *rlhf_generate(rlhf_prog *p, int64_t mi, rlhf_value *prompt,
                          const int64_t *lay, int64_t maxNew, int64_t n,
                          double temperature, double topP, int64_t greedy,
                          const char *label) {
  return guarded(p, label, [&] {
    ModelState &m = modelAt(p, mi);
    Layout l = layoutFrom(lay);
    GenerateSpec spec{maxNew,
                      n,
                      temperature,
                      topP,
                      greedy != 0,
                      label,
                      std::max<int64_t>(1, lay[4])};
    return timed(p, label, {"call", {l}}, [&] {
      std::optional<LlamaModel> model;
      if (callGroups(p, lay).member)
        model.emplace(makeModel(p, m, lay));
      return generatedValue(p,
                            generateRows(p, model ? &*model : nullptr, l,
                                         prompt, spec, samplingStep(p)),
                            l);
    });
  });
}

rlhf_value *rlhf_inference(rlhf_prog *p, int64_t mi, rlhf_value *seqV,
                           const int64_t *lay, double temperature,
                           const char *label) {
  return guarded(p, label, [&] {
    ModelState &m = modelAt(p, mi);
    Layout l = rowsLayout(lay);
    return timed(p, label, {"call", {l}}, [&] {
      at::Tensor mask;
      at::Tensor seq = rowsOn(p, seqV, l, &mask);
      ParallelGroups &g = callGroups(p, lay);
      const bool value = m.cfg.shape.valueHead;
      at::Tensor out, score;
      if (g.member) {
        at::NoGradGuard noGrad;
        LlamaModel model = makeModel(p, m, lay);
        model.setTemperature(temperature);
        // An lm head's result is its per-token log-probs from the fused
        // head, never the logits: under sp every rank gathers only those
        // (rowsLayout's "stages" are sp ranks), and a pipeline's last stage
        // broadcasts only those.
        const int64_t pp = lay[3];
        // The plan's micro-batches, one after another: activations of one
        // at a time, as it prices them, and with pipeline stages each
        // stage passes one on and takes the next while the later stages
        // work (forward only: the chain of messages needs no schedule).
        const int64_t mbs = std::min<int64_t>(
            std::max<int64_t>(1, lay[4]), std::max<int64_t>(1, seq.size(0)));
        std::vector<at::Tensor> parts;
        for (const at::Tensor &s : seq.split((seq.size(0) + mbs - 1) / mbs, 0))
          parts.push_back(value ? model.forward(s) : model.tokenStat(s, false));
        at::Tensor y =
            pp == 1 || model.lastStage() ? at::cat(parts) : at::Tensor();
        if (pp > 1) {
          if (!model.lastStage()) // fp32 like values and log-probs
            y = at::empty({seq.size(0), seq.size(1) - (value ? 0 : 1)},
                          p->fp32Opts());
          g.pp->broadcast(y, int(pp - 1));
        }
        y = y.cpu();
        if (!mask.defined())
          mask = predictedTokens(seq, p->tokenizer->pad());
        if (value) {
          out = y.narrow(1, 0, y.size(1) - 1).contiguous();
          // A sequence's score is the value at its last real token.
          at::Tensor real = (seq != p->tokenizer->pad()).to(at::kLong);
          at::Tensor pos =
              at::arange(seq.size(1), at::kLong).unsqueeze(0).expand_as(real);
          at::Tensor last = (pos * real).argmax(1, true);
          score = y.gather(1, last).squeeze(1);
        } else {
          out = y;
        }
      }
      std::map<std::string, rlhf_value *> f;
      f["seq"] = tensorValue(p, seq, mask, seqV->rows, l);
      f[value ? "values" : "logprobs"] =
          tensorValue(p, out, mask, seqV->rows, l);
      if (value) {
        f["score"] = tensorValue(p, score, at::Tensor(), seqV->rows, l);
        // A frozen value head scores samples: a reward model.
        if (!m.trainable)
          noteReward(p, f["score"], false);
        // A reward model's mean score is the run's reward curve (a critic's
        // is its mean value estimate).
        p->record("score/" + m.name,
                  score.defined() && score.numel() ? score.mean().item<double>()
                                                   : 0.0,
                  score.defined() && score.numel() > 0);
      }
      return recordValue(p, std::move(f));
    });
  });
}

rlhf_value *rlhf_compute(rlhf_prog *p, int64_t kind, int64_t nin,
                         rlhf_value *const *ins, const char *settings,
                         const char *label) {
  std::string what = label;
  return guarded(p, what, [&] {
    Settings s(settings);
    what = calledAt(label, s);
    return timed(p, label, {"host", {}}, [&] {
      std::vector<rlhf_value *> x;
      for (int64_t i = 0; i < nin; ++i)
        x.push_back(gathered(p, ins[i]));
      auto need = [&](int64_t n) {
        if (nin != n)
          throw Error(std::string(label) + " takes " + std::to_string(n) +
                      " inputs, got " + std::to_string(nin));
      };
      switch (kind) {
      case RLHF_COMPUTE_EXACT_MATCH: {
        need(2);
        at::Tensor seq = x[0]->t, mask = x[0]->mask;
        if (!mask.defined())
          throw Error(
              "exact_match needs generated sequences (a generate's seq)");
        auto predictions = std::make_shared<std::vector<std::string>>();
        at::Tensor score = exactMatch(
            seq.narrow(1, 1, seq.size(1) - 1), mask.to(at::kLong), x[1]->t,
            p->tokenizer->pad(), p->tokenizer->eos(), predictions.get());
        p->record("reward", score.mean().item<double>(), true);
        rlhf_value *v =
            tensorValue(p, score, at::Tensor(), x[0]->rows, std::nullopt);
        v->predictions = std::move(predictions);
        noteReward(p, v, true, x[1]);
        return recordValue(p, {{"score", v}});
      }
      case RLHF_COMPUTE_SCRIPT_REWARD:
        need(2);
        return scriptReward(p, ins[1], x, s);
      default:
        throw Error("unknown host function " + std::to_string(kind));
      }
    });
  });
}

void rlhf_ema(rlhf_prog *p, int64_t ti, int64_t si, double decay) {
  guarded(p, "ema", [&] {
    ModelState &t = modelAt(p, ti), &s = modelAt(p, si);
    if (t.offloaded || s.offloaded)
      throw Error("the plan offloads '" + (t.offloaded ? t.name : s.name) +
                  "', which an ema reads or writes; ema's models stay on "
                  "their GPUs");
    ParamMap src = weightsCopy(p, s, t.layout);
    at::NoGradGuard noGrad;
    const bool low = p->weightDtype != at::kFloat;
    for (auto &[n, x] : t.params) {
      auto it = src.find(n);
      if (it == src.end())
        continue;
      if (!low) {
        x.lerp_(it->second, 1.0 - decay);
        continue;
      }
      // The first blend starts from the weights as loaded.
      at::Tensor &w = t.master[n];
      if (!w.defined())
        w = x.to(at::kFloat);
      w.lerp_(it->second.to(at::kFloat), 1.0 - decay);
      x.copy_(w);
    }
    t.changed = true;
    return 0;
  });
}

} // extern "C"
