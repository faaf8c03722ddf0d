//===- FnEval.cpp - evaluating fn programs with ATen ----------------------===//
//
// A verified program runs as ATen ops on its inputs' device, in program
// order, computing only the values its results need. Losses keep autograd
// through the model's outputs; the semantics of every op are in
// FnProgram.h.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/FnProgram.h"
#include "rlhf/runtime/Train.h"

#include <ATen/core/grad_mode.h>

#include <limits>
#include <map>
#include <optional>
#include <set>

using namespace rlhf;

namespace {

std::string shapeStr(const at::Tensor &t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i)
    s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

/// 1 at each row's last position where `m` is non-zero (none for an empty
/// row).
at::Tensor lastOf(const at::Tensor &m) {
  at::Tensor nz = m != 0;
  at::Tensor out = at::zeros_like(m);
  if (m.size(1) == 0)
    return out;
  at::Tensor pos =
      at::arange(1, m.size(1) + 1, m.options().dtype(at::kLong)).unsqueeze(0) *
      nz;
  return out.scatter_(1, pos.argmax(1, true), nz.any(1, true).to(m.dtype()));
}

} // namespace

struct FnProgram::Eval {
  const FnProgram &f;
  const FnInputs &in;
  const FnModel *model = nullptr;
  const FnTokenStat *tokenStat = nullptr;
  /// tokenStat's results per (token input, entropy).
  std::map<std::pair<int64_t, bool>, at::Tensor> stats;
  std::vector<at::Tensor> x;       ///< the inputs, of their kinds' dtypes
  std::vector<at::Tensor> val;     ///< the program's values
  std::map<int64_t, at::Tensor> y; ///< the model's output per token input
  at::TensorOptions opts;          ///< of float values
  at::Tensor w;                    ///< the rows' weights, or undefined
  int64_t N = 0, T = -1;
  FnRunning own;         ///< without FnInputs::running: this call's rows
  std::set<int> counted; ///< values whose rows this call has added

  /// The running moments of value `v`, its rows added once per call.
  FnMoments moments(int v) {
    FnRunning &r = in.running ? *in.running : own;
    if (in.holdRunning) {
      auto it = r.moments.find(v);
      FnMoments m = it != r.moments.end() ? it->second : FnMoments();
      if (m.count == 0)
        m.add(val[size_t(v)]);
      return m;
    }
    FnMoments &m = r.moments[v];
    if (counted.insert(v).second)
      m.add(val[size_t(v)]);
    return m;
  }

  [[noreturn]] void fail(const Instr &i, const std::string &what) const {
    throw Error(f.describe() + ": line " + std::to_string(i.line) + ": " +
                what);
  }
  const Instr &declaration(int64_t input) const {
    for (const Instr &i : f.code)
      if (i.op == Op::Input && i.n[0] == input)
        return i;
    throw Error(f.describe() + ": no input " + std::to_string(input));
  }

  /// Checks the inputs against their kinds and each other.
  Eval(const FnProgram &f, const FnInputs &in) : f(f), in(in) {
    if (int64_t(in.tensors.size()) != f.numInputs())
      throw Error(f.describe() + " takes " + std::to_string(f.numInputs()) +
                  " inputs, got " + std::to_string(in.tensors.size()));
    for (int64_t i = 0; i < f.numInputs(); ++i) {
      const at::Tensor &t = in.tensors[size_t(i)];
      const FnKind k = f.inputs[size_t(i)];
      const Instr &decl = declaration(i);
      std::string what =
          "input " + std::to_string(i) + " (" + fnKindName(k) + ")";
      if (!t.defined())
        fail(decl, what + " is missing");
      const bool tok = k == FnKind::Tokens;
      if (t.dim() != (k == FnKind::PerSeq ? 1 : 2))
        fail(decl, what + " must be " +
                       (k == FnKind::PerSeq ? "[N]"
                        : tok               ? "[N, S]"
                                            : "[N, T]") +
                       ", got " + shapeStr(t));
      const bool intIds = at::isIntegralType(t.scalar_type(), false);
      if (tok ? !intIds
              : !(t.is_floating_point() || t.scalar_type() == at::kBool))
        fail(decl, what + " must hold " + (tok ? "token ids" : "floats") +
                       ", got " + std::string(c10::toString(t.scalar_type())));
      if (tok && t.size(1) < 1)
        fail(decl, what + " must have at least one token per row, got " +
                       shapeStr(t));
      if (i == 0)
        N = t.size(0), opts = t.options().dtype(at::kFloat);
      if (t.size(0) != N)
        fail(decl, what + " has " + std::to_string(t.size(0)) +
                       " rows, input 0 has " + std::to_string(N));
      if (k != FnKind::PerSeq) {
        int64_t cols = t.size(1) - (tok ? 1 : 0);
        if (T >= 0 && cols != T)
          fail(decl, what + " has " + std::to_string(cols) +
                         " predicted tokens per row (T = S-1 for tok), " +
                         "an earlier input has " + std::to_string(T));
        T = cols;
      }
      // Every float value is fp32, on input 0's device.
      x.push_back(t.to(opts.dtype(tok ? at::kLong : at::kFloat)));
    }
    if (in.rowWeights.defined()) {
      if (in.rowWeights.dim() != 1 || in.rowWeights.size(0) != N)
        throw Error(f.describe() + ": row weights " + shapeStr(in.rowWeights) +
                    " for " + std::to_string(N) + " rows");
      w = in.rowWeights.to(opts);
    }
  }

  /// `t` [N] or [N, T] with each row scaled by its weight; 0 for a row of
  /// weight 0 whatever it holds.
  at::Tensor weighed(const at::Tensor &t) const {
    if (!w.defined())
      return t;
    at::Tensor r = t.dim() == 2 ? w.unsqueeze(1) : w;
    return at::where(r != 0, t * r, at::zeros({}, t.options()));
  }

  /// Evaluates every value the values `roots` need.
  void run(const std::vector<int> &roots, const std::vector<double> *denoms) {
    std::vector<bool> need(f.code.size(), false);
    for (int r : roots)
      need[size_t(r)] = true;
    for (size_t k = f.code.size(); k-- > 0;)
      if (need[k])
        for (int a : f.code[k].args)
          need[size_t(a)] = true;
    val.assign(f.code.size(), at::Tensor());
    for (size_t k = 0; k < f.code.size(); ++k)
      if (need[k])
        val[k] = compute(f.code[k], denoms);
  }

  int64_t inputOf(const Instr &i) const {
    return f.code[size_t(i.args[0])].n[0];
  }

  /// The mask input `inputOf(i)` carries; a token input without one masks
  /// its non-pad predicted tokens.
  at::Tensor maskOf(const Instr &i) {
    const int64_t k = inputOf(i);
    const at::Tensor &v = x[size_t(k)];
    const bool tok = f.inputs[size_t(k)] == FnKind::Tokens;
    const int64_t S = v.size(1);
    at::Tensor m =
        size_t(k) < in.masks.size() ? in.masks[size_t(k)] : at::Tensor();
    if (!m.defined()) {
      if (!tok)
        fail(i, "input " + std::to_string(k) +
                    " (rank 2) carries no mask for 'mask_of' to read");
      return (v.narrow(1, 1, S - 1) != in.pad).to(opts.dtype());
    }
    if (m.dim() != 2 || m.size(0) != N || m.size(1) != (tok ? S - 1 : S))
      fail(i, "the mask of input " + std::to_string(k) + " is " + shapeStr(m) +
                  (tok ? ", its tokens " : ", its values ") + shapeStr(v) +
                  (tok ? " need [N, S-1]" : " need [N, T]"));
    return m.to(opts);
  }

  /// The model's output for the token value of `i`, computed once.
  at::Tensor output(const Instr &i, bool logits) {
    const int64_t k = inputOf(i);
    if (!model)
      fail(i, "'" + name(i) + "' needs the trained model");
    auto it = y.find(k);
    if (it == y.end())
      it = y.emplace(k, (*model)(k, x[size_t(k)])).first;
    const at::Tensor &out = it->second;
    const at::Tensor &seq = x[size_t(k)];
    if (out.dim() != (logits ? 3 : 2) || out.size(0) != N ||
        out.size(1) != seq.size(1))
      fail(i, "'" + name(i) + "' needs " +
                  (logits ? "logits [N, S, V] of an lm head"
                          : "values [N, S] of a value head") +
                  ", the model gives " + shapeStr(out) + " for tokens " +
                  shapeStr(seq));
    return out;
  }
  /// Whether an entropy of token input `k` reaches the loss (output 0) of
  /// a loss; else it feeds only metrics (verl's actor/entropy) and needs no
  /// gradient.
  bool entropyReachesLoss(int64_t k) const {
    if (f.fnMode != Mode::Loss || f.outValues.empty())
      return false; // host functions run without gradients
    std::vector<char> live(f.code.size(), 0);
    std::vector<int> work{f.outValues[0]};
    while (!work.empty()) {
      int v = work.back();
      work.pop_back();
      if (v < 0 || live[size_t(v)])
        continue;
      live[size_t(v)] = 1;
      for (int a : f.code[size_t(v)].args)
        work.push_back(a);
    }
    for (size_t v = 0; v < f.code.size(); ++v)
      if (live[v] && f.code[v].op == Op::Entropy && inputOf(f.code[v]) == k)
        return true;
    return false;
  }

  /// tokenStat's log-probs or entropies for the token value of `i`. The
  /// first asks for every statistic the program reads of that input.
  at::Tensor stat(const Instr &i, bool entropy) {
    const int64_t k = inputOf(i);
    auto it = stats.find({k, entropy});
    if (it == stats.end()) {
      bool reads[2] = {false, false}; // log-probs, entropy
      for (const Instr &j : f.code)
        if ((j.op == Op::Logprobs || j.op == Op::Entropy) && inputOf(j) == k)
          reads[j.op == Op::Entropy] = true;
      auto [lp, h] = (*tokenStat)(k, x[size_t(k)], reads[0], reads[1],
                                  reads[1] && entropyReachesLoss(k));
      stats[{k, false}] = lp;
      stats[{k, true}] = h;
      it = stats.find({k, entropy});
    }
    const at::Tensor &seq = x[size_t(k)];
    if (it->second.dim() != 2 || it->second.size(0) != N ||
        it->second.size(1) != seq.size(1) - 1)
      fail(i, "'" + name(i) +
                  "' needs [N, S-1] per-token values, the model "
                  "gives " +
                  shapeStr(it->second) + " for tokens " + shapeStr(seq));
    return it->second;
  }
  std::string name(const Instr &i) const {
    static const char *names[] = {"logprobs", "values", "score", "entropy"};
    return i.op >= Op::Logprobs ? names[int(i.op) - int(Op::Logprobs)] : "op";
  }

  /// The D of a loss's batch reduction.
  double denom(const Instr &i, const std::vector<double> *denoms) const {
    if (i.op == Op::TokenSum || i.op == Op::BatchSum)
      return 1;
    return std::max(1.0, (*denoms)[size_t(i.denom)]);
  }

  /// v * m, and 0 where m is 0 even if v is not finite there: padding may
  /// hold an inf (log of a masked 0) that a plain product turns into nan.
  static at::Tensor masked(const at::Tensor &v, const at::Tensor &m) {
    return at::where(m != 0, v * m, at::zeros({}, v.options()));
  }

  /// sum, mean, var or std (`stat` 0..3) over `dim` of `v` weighted by
  /// `m`: var = sum(m (v - mean)^2) / max(sum(m) - C, 1).
  at::Tensor stat(int stat, const at::Tensor &v, const at::Tensor &m,
                  at::OptionalIntArrayRef dim, int64_t C) {
    at::Tensor sum = masked(v, m).sum(dim);
    if (stat == 0)
      return sum;
    at::Tensor count = m.sum(dim);
    at::Tensor mean = sum / count.clamp_min(1);
    if (stat == 1)
      return mean;
    at::Tensor d = v - (dim ? mean.unsqueeze(-1) : mean);
    at::Tensor var =
        masked(d * d, m).sum(dim) / (count - double(C)).clamp_min(1);
    return stat == 2 ? var : var.sqrt();
  }

  /// The largest (`max`) or smallest value of `v` where `m` is not 0, per
  /// row (`perRow`) or over all; 0 where nothing is masked. The gradient
  /// goes to the extreme (shared among ties, as at::amax).
  static at::Tensor extreme(bool max, const at::Tensor &v, const at::Tensor &m,
                            bool perRow) {
    const double fill = max ? -std::numeric_limits<double>::infinity()
                            : std::numeric_limits<double>::infinity();
    at::Tensor on = m != 0;
    at::Tensor x = at::where(on, v, at::full({}, fill, v.options()));
    if (perRow)
      return at::where(on.any(1), max ? x.amax(1) : x.amin(1),
                       at::zeros({}, v.options()));
    return at::where(on.any(), max ? x.amax() : x.amin(),
                     at::zeros({}, v.options()));
  }

  at::Tensor compute(const Instr &i, const std::vector<double> *denoms) {
    auto a = [&](size_t j) { return val[size_t(i.args[j])]; };
    const bool loss = f.fnMode == Mode::Loss;
    switch (i.op) {
    case Op::Input:
      return x[size_t(i.n[0])];
    case Op::Const:
      return at::scalar_tensor(i.nums[0], opts);
    case Op::AdaptiveKl:
    case Op::AdaptiveEntropy: {
      const size_t k =
          size_t(i.op == Op::AdaptiveKl ? FnControl::Kind::Kl
                                        : FnControl::Kind::Entropy);
      return at::scalar_tensor(in.coefs[k].value_or(i.nums[0]), opts);
    }
    case Op::RunningMean:
    case Op::RunningStd: {
      const FnMoments m = moments(i.args[0]);
      return at::scalar_tensor(i.op == Op::RunningMean ? m.mean : m.stdDev(),
                               opts);
    }
    case Op::Neg:
      return -a(0);
    case Op::Exp:
      return a(0).exp();
    case Op::Log:
      return a(0).log();
    case Op::Log1p:
      return a(0).log1p();
    case Op::Expm1:
      return a(0).expm1();
    case Op::Sqrt:
      return a(0).sqrt();
    case Op::Abs:
      return a(0).abs();
    case Op::Sigmoid:
      return a(0).sigmoid();
    case Op::Softplus:
      return at::softplus(a(0));
    case Op::StopGradient:
      return a(0).detach();
    case Op::Add:
      return a(0) + a(1);
    case Op::Sub:
      return a(0) - a(1);
    case Op::Mul:
      return a(0) * a(1);
    case Op::Div:
      return a(0) / a(1);
    case Op::Min:
      return at::minimum(a(0), a(1));
    case Op::Max:
      return at::maximum(a(0), a(1));
    case Op::Lt:
      return at::lt(a(0), a(1)).to(opts.dtype());
    case Op::Le:
      return at::le(a(0), a(1)).to(opts.dtype());
    case Op::Gt:
      return at::gt(a(0), a(1)).to(opts.dtype());
    case Op::Ge:
      return at::ge(a(0), a(1)).to(opts.dtype());
    case Op::Eq:
      return at::eq(a(0), a(1)).to(opts.dtype());
    case Op::Ne:
      return at::ne(a(0), a(1)).to(opts.dtype());
    case Op::Where:
      return at::where(a(0) != 0, a(1), a(2));
    case Op::Clamp:
      return at::clamp(a(0), a(1), a(2));
    case Op::Broadcast:
      return a(0).unsqueeze(1).expand_as(a(1));
    case Op::SeqSum:
    case Op::SeqMean:
    case Op::SeqVar:
    case Op::SeqStd:
      return stat(int(i.op) - int(Op::SeqSum), a(0), a(1), at::IntArrayRef{1},
                  i.n.empty() ? 0 : i.n[0]);
    case Op::GroupSum:
    case Op::GroupMean:
    case Op::GroupVar:
    case Op::GroupStd:
    case Op::GroupMax:
    case Op::GroupMin: {
      const int64_t G = i.n[0];
      if (N % G)
        fail(i, std::to_string(N) + " rows do not split into groups of " +
                    std::to_string(G));
      at::Tensor g = a(0).reshape({-1, G}), s;
      if (i.op == Op::GroupSum)
        s = g.sum(1, true);
      else if (i.op == Op::GroupMax)
        s = g.amax(1, true);
      else if (i.op == Op::GroupMin)
        s = g.amin(1, true);
      else if (i.op == Op::GroupMean)
        s = g.mean(1, true);
      else if (i.op == Op::GroupVar)
        s = at::var(g, at::IntArrayRef{1}, at::Scalar(i.n[1]), true);
      else // at::std, exactly as grpoAdvantages computes it for C = 1
        s = at::std(g, at::IntArrayRef{1}, at::Scalar(i.n[1]), true);
      return s.expand({-1, G}).reshape({-1});
    }
    case Op::BatchSum:
    case Op::BatchMean:
    case Op::BatchVar:
    case Op::BatchStd:
      if (loss)
        return weighed(a(0)).sum() / denom(i, denoms);
      return stat(int(i.op) - int(Op::BatchSum), a(0), at::ones_like(a(0)),
                  std::nullopt, i.n.empty() ? 0 : i.n[0]);
    case Op::TokenSum:
    case Op::TokenMean:
    case Op::TokenVar:
    case Op::TokenStd:
      if (loss)
        return weighed(masked(a(0), a(1))).sum() / denom(i, denoms);
      return stat(int(i.op) - int(Op::TokenSum), a(0), a(1), std::nullopt,
                  i.n.empty() ? 0 : i.n[0]);
    case Op::SeqMax:
    case Op::SeqMin:
    case Op::TokenMax:
    case Op::TokenMin:
      return extreme(i.op == Op::SeqMax || i.op == Op::TokenMax, a(0), a(1),
                     i.op <= Op::SeqMin);
    case Op::BatchMax:
      return a(0).numel() ? a(0).amax() : at::zeros({}, a(0).options());
    case Op::BatchMin:
      return a(0).numel() ? a(0).amin() : at::zeros({}, a(0).options());
    case Op::Last:
      return lastOf(a(0));
    case Op::Next: {
      at::Tensor v = a(0);
      if (v.size(1) == 0)
        return v;
      return at::cat({v.narrow(1, 1, v.size(1) - 1),
                      at::zeros({v.size(0), 1}, v.options())},
                     1);
    }
    case Op::NextMasked: {
      // The value at the row's next masked position, carried back over the
      // holes, step by step as Rcumsum scans.
      at::Tensor v = a(0), m = a(1);
      std::vector<at::Tensor> cols(size_t(v.size(1)));
      at::Tensor running = at::zeros({v.size(0)}, v.options());
      for (int64_t t = v.size(1) - 1; t >= 0; --t) {
        cols[size_t(t)] = running;
        at::Tensor mt = m.select(1, t);
        running = at::where(mt != 0, v.select(1, t) * mt + running * (1 - mt),
                            running);
      }
      return cols.empty() ? v : at::stack(cols, 1);
    }
    case Op::Rcumsum: {
      // rlhf::gae's recursion, step by step so that autograd sees it.
      at::Tensor v = a(0), g = a(1), m = a(2);
      std::vector<at::Tensor> cols(size_t(v.size(1)));
      at::Tensor running = at::zeros({v.size(0)}, v.options());
      for (int64_t t = v.size(1) - 1; t >= 0; --t) {
        at::Tensor mt = m.select(1, t);
        running = at::where(
            mt != 0, (v.select(1, t) + g * running) * mt + running * (1 - mt),
            running);
        cols[size_t(t)] = masked(running, mt);
      }
      return cols.empty() ? v : at::stack(cols, 1);
    }
    case Op::MaskOf:
      return maskOf(i);
    case Op::Logprobs: {
      if (tokenStat)
        return stat(i, false);
      return tokenLogprobs(output(i, true), x[size_t(inputOf(i))]);
    }
    case Op::Values: {
      at::Tensor v = output(i, false);
      return v.narrow(1, 0, v.size(1) - 1);
    }
    case Op::Score: {
      // The value at the last trained token, as the reward model's loss
      // reads it.
      at::Tensor v = output(i, false);
      return (v.narrow(1, 1, v.size(1) - 1) * lastOf(maskOf(i))).sum(1);
    }
    case Op::Entropy: {
      if (tokenStat)
        return stat(i, true);
      at::Tensor l = output(i, true);
      at::Tensor lp = at::log_softmax(l.narrow(1, 0, l.size(1) - 1), -1);
      return -(lp.exp() * lp).sum(-1);
    }
    }
    fail(i, "unknown op");
  }

  /// The D of every batch reduction over these inputs' rows.
  std::vector<double> denominators() {
    std::vector<int> masks;
    for (const Instr &i : f.code)
      if (i.denom >= 0 && i.op == Op::TokenMean)
        masks.push_back(i.args[1]);
    run(masks, nullptr);
    std::vector<double> d(size_t(f.numDenoms), 0.0);
    for (const Instr &i : f.code) {
      if (i.denom < 0)
        continue;
      if (i.op == Op::TokenMean)
        d[size_t(i.denom)] =
            weighed(val[size_t(i.args[1])]).sum().item<double>();
      else if (i.op == Op::BatchMean)
        d[size_t(i.denom)] = w.defined() ? w.sum().item<double>() : double(N);
    }
    return d;
  }
};

// Chan et al.'s merge of a batch's moments into the running ones.
void FnMoments::add(const at::Tensor &x) {
  const at::Tensor d = x.detach().to(at::kCPU).to(at::kDouble).reshape({-1});
  const double n = double(d.numel());
  if (n == 0)
    return;
  const double mean1 = d.mean().item<double>();
  const double m21 = (d - mean1).pow(2).sum().item<double>();
  const double total = count + n, delta = mean1 - mean;
  mean += delta * n / total;
  m2 += m21 + delta * delta * count * n / total;
  count = total;
}

double FnMoments::stdDev() const {
  return count > 1 ? std::sqrt(m2 / (count - 1)) : 0.0;
}

std::vector<double> FnProgram::localDenominators(const FnInputs &in) const {
  at::NoGradGuard ng;
  return Eval(*this, in).denominators();
}

std::vector<at::Tensor>
FnProgram::evaluate(const FnInputs &in, const FnModel *model,
                    const std::vector<double> *denominators,
                    const FnTokenStat *tokenStat) const {
  const bool loss = fnMode == Mode::Loss;
  // A host function's results are data; only a loss needs a graph.
  std::optional<at::NoGradGuard> ng;
  if (!loss)
    ng.emplace();
  Eval e(*this, in);
  e.model = model;
  e.tokenStat = tokenStat;
  std::vector<double> local;
  if (loss && !denominators) {
    local = e.denominators();
    denominators = &local;
  }
  if (loss && int64_t(denominators->size()) != numDenoms)
    throw Error("fn '" + fnName + "' has " + std::to_string(numDenoms) +
                " batch reductions, got " +
                std::to_string(denominators->size()) + " denominators");
  e.run(outValues, denominators);
  std::vector<at::Tensor> out;
  for (int v : outValues)
    out.push_back(loss ? e.val[size_t(v)] : e.val[size_t(v)].contiguous());
  return out;
}
