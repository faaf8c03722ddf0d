//===- ProgramFns.cpp - functions written in the language -----------------===//
//
// The rlhf_program.h entry points of user functions (FnProgram.h): a host
// function applied to batch values on the controller, and a train call
// whose loss is one. The compiler embeds each call site's fn code as a
// constant string, so a program is parsed once per address.
//
//===----------------------------------------------------------------------===//

#include "ProgramSteps.h"

#include <cstdio>
#include <cstdlib>

using namespace rlhf;
using namespace rlhf::exec;

namespace {

/// The parsed program of `code`, parsed and verified at its first use.
const FnProgram &fnProgram(rlhf_prog *p, const char *code, FnProgram::Mode mode,
                           const char *entry) {
  if (!code)
    throw Error(std::string(entry) + ": no fn code");
  auto it = p->fnPrograms.find(code);
  if (it == p->fnPrograms.end() || it->second.first != code) {
    FnProgram f = FnProgram::parse(code);
    it = p->fnPrograms.insert_or_assign(code, std::make_pair(code, f)).first;
  }
  const FnProgram &f = it->second.second;
  if (f.mode() != mode)
    throw Error(
        "fn '" + f.name() + "' is " +
        (mode == FnProgram::Mode::Loss
             ? "a host function; " + std::string(entry) + " takes a loss"
             : "a loss; train calls take it (rlhf_train), not " +
                   std::string(entry)));
  return f;
}

/// Where host functions run: the rank's device, unless RLHF_HOST_FNS=cpu.
c10::Device hostFnDevice(const rlhf_prog *p) {
  const char *v = std::getenv("RLHF_HOST_FNS");
  std::string want = v && *v ? v : "device";
  if (want == "cpu")
    return c10::kCPU;
  if (want != "device")
    throw Error("environment variable RLHF_HOST_FNS='" + want +
                "' is not one of device, cpu");
  return p->device;
}

void checkInputCount(const FnProgram &f, int64_t nin) {
  if (nin != f.numInputs())
    throw Error(f.describe() + " takes " + std::to_string(f.numInputs()) +
                " inputs, the call passes " + std::to_string(nin));
}

/// Where `t` is not finite: where `mask` is set, for values per token
/// (padding may hold anything); none for a tensor that is not floating.
at::Tensor nonFinite(const at::Tensor &t, const at::Tensor &mask) {
  if (!t.defined() || !t.is_floating_point())
    return at::zeros({}, at::kBool);
  at::Tensor bad = at::isfinite(t).logical_not();
  if (mask.defined() && mask.sizes() == t.sizes())
    bad = bad.logical_and(mask.to(bad.device()) != 0);
  return bad;
}

/// The first row that `bad` marks, or -1 (0 for a scalar).
int64_t firstRow(const at::Tensor &bad) {
  if (!bad.any().item<bool>())
    return -1;
  return bad.dim() == 0 ? 0
                        : bad.reshape({bad.size(0), -1})
                              .any(1)
                              .nonzero()[0][0]
                              .item<int64_t>();
}

/// A host function's non-finite output stops the run here, naming the
/// function's call in the .rlhf file, rather than later as a nan loss.
void checkFinite(rlhf_prog *p, const FnProgram &f, const FnInputs &in,
                 const std::vector<at::Tensor> &out, const at::Tensor &mask) {
  for (size_t k = 0; k < out.size(); ++k) {
    const at::Tensor &t = out[k];
    const at::Tensor bad =
        nonFinite(t, f.outputKind(k) == FnKind::PerToken ? mask : at::Tensor());
    const int64_t row = firstRow(bad);
    if (row < 0)
      continue;
    std::string cause = "the function divides by zero, or takes the log or "
                        "square root of a negative number; guard it (clamp, "
                        "where) or check its inputs";
    for (size_t i = 0; i < in.tensors.size(); ++i)
      if (firstRow(nonFinite(in.tensors[i], in.masks[i])) >= 0) {
        cause = "its input " + std::to_string(i + 1) +
                " is not finite already; look at what produced it";
        break;
      }
    // Named by what the checked values hold, not the padding.
    const bool nan = at::isnan(t).logical_and(bad).any().item<bool>();
    throw Error(f.describe() + " gave " + (nan ? "nan" : "an infinity") +
                " in its output '" + f.outputNames()[k] + "'" +
                (t.dim() == 0 ? "" : " at row " + std::to_string(row + 1)) +
                " at step " + std::to_string(p->stepIndex + 1) + ": " + cause);
  }
}

} // namespace

FnRunning *rlhf::exec::runningAt(rlhf_prog *p, const FnProgram &f) {
  if (!f.keepsMoments())
    return nullptr;
  auto [it, fresh] = p->fnState.running.try_emplace(f.describe());
  if (fresh) {
    auto r = p->fnState.resumedRunning.find(it->first);
    if (r != p->fnState.resumedRunning.end())
      it->second = r->second;
  }
  return &it->second;
}

nlohmann::json rlhf::exec::fnStateJson(const rlhf_prog *p) {
  // json writes a double so that it reads back the same.
  nlohmann::json j = nlohmann::json::object();
  // kl_coef: {site: value}; entropy_coef: {site: [value, on]}.
  for (const auto &[key, c] : p->fnState.coefs) {
    if (c.ctl.kind == FnControl::Kind::Kl)
      j["kl_coef"][key.second] = c.state.value;
    else
      j["entropy_coef"][key.second] = {c.state.value, c.state.on};
  }
  for (const auto &[site, r] : p->fnState.running)
    for (const auto &[v, m] : r.moments)
      j["running_moments"][site]["%" + std::to_string(v)] = {m.count, m.mean,
                                                             m.m2};
  return j;
}

void rlhf::exec::restoreFnState(rlhf_prog *p, const nlohmann::json &j) {
  if (!j.is_object())
    return;
  if (j.contains("kl_coef") && j["kl_coef"].is_object())
    for (auto &[site, v] : j["kl_coef"].items())
      if (v.is_number())
        p->fnState.resumedCoefs[{int(FnControl::Kind::Kl), site}] = {
            v.get<double>(), true};
  if (j.contains("entropy_coef") && j["entropy_coef"].is_object())
    for (auto &[site, v] : j["entropy_coef"].items())
      if (v.is_array() && v.size() == 2 && v[0].is_number() &&
          v[1].is_boolean())
        p->fnState.resumedCoefs[{int(FnControl::Kind::Entropy), site}] = {
            v[0].get<double>(), v[1].get<bool>()};
  if (j.contains("running_moments") && j["running_moments"].is_object())
    for (auto &[site, values] : j["running_moments"].items()) {
      if (!values.is_object())
        continue;
      for (auto &[v, m] : values.items()) {
        // "%ID": [count, mean, m2]
        if (v.size() < 2 || v[0] != '%' || !m.is_array() || m.size() != 3 ||
            !m[0].is_number() || !m[1].is_number() || !m[2].is_number())
          continue;
        const int id = std::atoi(v.c_str() + 1);
        if (id >= 0)
          p->fnState.resumedRunning[site].moments[id] = {
              m[0].get<double>(), m[1].get<double>(), m[2].get<double>()};
      }
    }
}

FnCoefs rlhf::exec::coefsAt(rlhf_prog *p, const FnProgram &f) {
  FnCoefs out;
  for (const std::optional<FnControl> &c : f.controls()) {
    if (!c)
      continue;
    const FnState::CoefKey key{int(c->kind), f.describe()};
    auto [it, fresh] = p->fnState.coefs.try_emplace(key);
    if (fresh) {
      it->second.ctl = *c;
      auto r = p->fnState.resumedCoefs.find(key);
      it->second.state =
          r != p->fnState.resumedCoefs.end() ? r->second : c->start();
    }
    out[size_t(c->kind)] = FnControl::coefficient(it->second.state);
  }
  return out;
}

void rlhf::exec::recordCoefs(rlhf_prog *p, const FnProgram &f,
                             const FnCoefs &coefs, const std::string &suffix,
                             bool member) {
  for (const std::optional<FnControl> &c : f.controls())
    if (c && coefs[size_t(c->kind)])
      p->record(std::string(c->metric()) + "_coef" + suffix,
                *coefs[size_t(c->kind)], member);
}

void rlhf::exec::noteMeasured(rlhf_prog *p, const FnProgram &f,
                              const std::string &output, size_t slot,
                              int64_t rows) {
  // An evaluation measures with the coefficients but does not move them.
  if (p->eval.seedStep)
    return;
  for (const std::optional<FnControl> &c : f.controls())
    if (c && output == c->metric())
      p->fnState.coefs.at({int(c->kind), f.describe()}).measured =
          std::make_pair(slot, rows);
}

void rlhf::exec::endStepFnState(rlhf_prog *p, const at::Tensor &gathered) {
  for (auto &site : p->fnState.coefs) {
    FnState::Coef &c = site.second;
    if (!c.measured)
      continue;
    auto [slot, rows] = *c.measured;
    c.measured.reset();
    // The kl or entropy the step logged, which every rank computes alike.
    if (std::optional<double> m = combinedMetric(gathered, slot, false))
      c.state = c.ctl.next(c.state, *m, rows);
  }
  // A resumed coefficient or statistic no call took: its call moved in
  // the file.
  for (const auto &[key, state] : p->fnState.resumedCoefs)
    if (!p->fnState.coefs.count(key) && p->rank == 0) {
      const auto kind = FnControl::Kind(key.first);
      std::fprintf(stderr,
                   "%s: warning: --resume: the checkpoint's adaptive %s "
                   "coefficient %.6g of %s matches no call of this step; "
                   "the program's %s calls start from their initial "
                   "values\n",
                   p->name.c_str(), FnControl::noun(kind), state.value,
                   key.second.c_str(), FnControl::op(kind));
    }
  for (const auto &[site, r] : p->fnState.resumedRunning)
    if (!p->fnState.running.count(site) && p->rank == 0)
      std::fprintf(stderr,
                   "%s: warning: --resume: the checkpoint's running moments "
                   "of %s match no call of this step; the program's "
                   "running_mean and running_std start afresh\n",
                   p->name.c_str(), site.c_str());
  p->fnState.resumedCoefs.clear();
  p->fnState.resumedRunning.clear();
}

extern "C" {

rlhf_value *rlhf_apply(rlhf_prog *p, const char *code, int64_t nin,
                       rlhf_value *const *ins, const char *label) {
  return guarded(p, label, [&] {
    const FnProgram &f =
        fnProgram(p, code, FnProgram::Mode::Host, "rlhf_apply");
    checkInputCount(f, nin);
    return timed(p, label, {"host", {}}, [&] {
      FnInputs in;
      in.pad = p->tokenizer->pad();
      int64_t rows = 1;
      at::Tensor mask; // the first input's that has one, for rank-2 results
      // Host functions run where the models are (the values come back to
      // the executor on the host); RLHF_HOST_FNS=cpu keeps them there.
      const c10::Device where = hostFnDevice(p);
      auto there = [&](const at::Tensor &t) {
        return t.defined() ? t.to(where) : t;
      };
      for (int64_t i = 0; i < nin; ++i) {
        rlhf_value *v = gathered(p, ins[i]);
        in.tensors.push_back(there(v->t));
        in.masks.push_back(there(v->mask));
        if (i == 0)
          rows = v->rows;
        if (!mask.defined())
          mask = v->mask;
      }
      in.coefs = coefsAt(p, f);
      in.running = runningAt(p, f);
      // An evaluation reads the run's statistics without adding to them.
      in.holdRunning = p->eval.seedStep.has_value();
      recordCoefs(p, f, in.coefs, "", true);
      std::vector<at::Tensor> out = f.evaluate(in);
      for (at::Tensor &t : out)
        t = t.to(at::kCPU);
      checkFinite(p, f, in, out, mask);
      std::map<std::string, rlhf_value *> fields;
      for (size_t k = 0; k < out.size(); ++k) {
        FnKind kind = f.outputKind(k);
        fields[f.outputNames()[k]] = tensorValue(
            p, out[k], kind == FnKind::PerToken ? mask : at::Tensor(),
            kind == FnKind::Scalar ? 1 : rows, std::nullopt);
        // A scalar output is a metric (every rank computed the same).
        if (kind == FnKind::Scalar) {
          noteMeasured(p, f, f.outputNames()[k], p->metricCursor, rows);
          p->record(f.outputNames()[k], out[k].item<double>(), true);
        }
      }
      return recordValue(p, std::move(fields));
    });
  });
}

rlhf_value *rlhf_train(rlhf_prog *p, int64_t mi, const char *code, int64_t nin,
                       rlhf_value *const *ins, const int64_t *lay,
                       int64_t minibatches, int64_t epochs,
                       const char *settings, const char *label) {
  return guarded(p, label, [&] {
    const FnProgram &loss =
        fnProgram(p, code, FnProgram::Mode::Loss, "rlhf_train");
    checkInputCount(loss, nin);
    return trainCall(p, mi, loss, nin, ins, lay, minibatches, epochs, settings,
                     label);
  });
}

void rlhf_eval_loss(rlhf_prog *p, int64_t mi, const char *code, int64_t nin,
                    rlhf_value *const *ins, const int64_t *lay,
                    int64_t minibatches, const char *settings,
                    const char *label) {
  guarded(p, label, [&] {
    const FnProgram &loss =
        fnProgram(p, code, FnProgram::Mode::Loss, "rlhf_eval_loss");
    checkInputCount(loss, nin);
    evalLossCall(p, mi, loss, nin, ins, lay, minibatches, settings, label);
    return 0;
  });
}

} // extern "C"
