//===- FnProgram.cpp - parsing and verifying fn code ----------------------===//
//
// The text format and its rules are documented in FnProgram.h. Everything
// that can be checked without tensors is checked here, once per program,
// so that evaluation only has to check the shapes of its inputs.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/FnProgram.h"
#include "rlhf/runtime/Error.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

using namespace rlhf;

const char *rlhf::fnKindName(FnKind k) {
  switch (k) {
  case FnKind::Scalar:
    return "rank 0";
  case FnKind::PerSeq:
    return "rank 1";
  case FnKind::PerToken:
    return "rank 2";
  case FnKind::Tokens:
    return "tok";
  }
  return "?";
}

namespace {

std::string ref(int v) { return "%" + std::to_string(v); }

std::string numText(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (true) {
    size_t end = s.find(sep, at);
    out.push_back(s.substr(at, end == s.npos ? s.npos : end - at));
    if (end == s.npos)
      return out;
    at = end + 1;
  }
}

bool parseInt(std::string_view s, int64_t &out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

} // namespace

struct FnProgram::Parser {
  /// One op's spelling and operands: `%x` a value, `KIND` an input kind,
  /// `X` a number, any other word an integer literal.
  struct OpInfo {
    std::string_view name;
    Op op;
    std::string_view usage;
  };
  static const OpInfo *lookup(std::string_view name) {
    static const OpInfo table[] = {
        {"input", Op::Input, "I KIND"},
        {"const", Op::Const, "X"},
        {"adaptive_kl", Op::AdaptiveKl, "X X X"},
        {"adaptive_entropy", Op::AdaptiveEntropy, "X X X X X"},
        {"running_mean", Op::RunningMean, "%x"},
        {"running_std", Op::RunningStd, "%x"},
        {"neg", Op::Neg, "%x"},
        {"exp", Op::Exp, "%x"},
        {"log", Op::Log, "%x"},
        {"log1p", Op::Log1p, "%x"},
        {"expm1", Op::Expm1, "%x"},
        {"sqrt", Op::Sqrt, "%x"},
        {"abs", Op::Abs, "%x"},
        {"sigmoid", Op::Sigmoid, "%x"},
        {"softplus", Op::Softplus, "%x"},
        {"stop_gradient", Op::StopGradient, "%x"},
        {"add", Op::Add, "%a %b"},
        {"sub", Op::Sub, "%a %b"},
        {"mul", Op::Mul, "%a %b"},
        {"div", Op::Div, "%a %b"},
        {"min", Op::Min, "%a %b"},
        {"max", Op::Max, "%a %b"},
        {"lt", Op::Lt, "%a %b"},
        {"le", Op::Le, "%a %b"},
        {"gt", Op::Gt, "%a %b"},
        {"ge", Op::Ge, "%a %b"},
        {"eq", Op::Eq, "%a %b"},
        {"ne", Op::Ne, "%a %b"},
        {"where", Op::Where, "%c %a %b"},
        {"clamp", Op::Clamp, "%x %lo %hi"},
        {"broadcast", Op::Broadcast, "%x %like"},
        {"seq_sum", Op::SeqSum, "%x %m"},
        {"seq_mean", Op::SeqMean, "%x %m"},
        {"seq_var", Op::SeqVar, "%x %m C"},
        {"seq_std", Op::SeqStd, "%x %m C"},
        {"group_sum", Op::GroupSum, "%x G"},
        {"group_mean", Op::GroupMean, "%x G"},
        {"group_var", Op::GroupVar, "%x G C"},
        {"group_std", Op::GroupStd, "%x G C"},
        {"batch_sum", Op::BatchSum, "%x"},
        {"batch_mean", Op::BatchMean, "%x"},
        {"batch_var", Op::BatchVar, "%x C"},
        {"batch_std", Op::BatchStd, "%x C"},
        {"token_sum", Op::TokenSum, "%x %m"},
        {"token_mean", Op::TokenMean, "%x %m"},
        {"token_var", Op::TokenVar, "%x %m C"},
        {"token_std", Op::TokenStd, "%x %m C"},
        {"seq_max", Op::SeqMax, "%x %m"},
        {"seq_min", Op::SeqMin, "%x %m"},
        {"group_max", Op::GroupMax, "%x G"},
        {"group_min", Op::GroupMin, "%x G"},
        {"batch_max", Op::BatchMax, "%x"},
        {"batch_min", Op::BatchMin, "%x"},
        {"token_max", Op::TokenMax, "%x %m"},
        {"token_min", Op::TokenMin, "%x %m"},
        {"last", Op::Last, "%m"},
        {"next", Op::Next, "%x"},
        {"next_masked", Op::NextMasked, "%x %m"},
        {"rcumsum", Op::Rcumsum, "%x %g %m"},
        {"mask_of", Op::MaskOf, "%t"},
        {"logprobs", Op::Logprobs, "%t"},
        {"values", Op::Values, "%t"},
        {"score", Op::Score, "%t"},
        {"entropy", Op::Entropy, "%t"},
    };
    for (const OpInfo &o : table)
      if (o.name == name)
        return &o;
    return nullptr;
  }

  FnProgram &f;
  int line = 0;
  int version = 1;
  std::string_view opName;
  std::map<int64_t, int> inputLine; ///< first declaration of each input

  [[noreturn]] void fail(const std::string &what) const {
    throw Error("fn " + (f.fnName.empty() ? "code" : "'" + f.fnName + "'") +
                ": line " + std::to_string(line) + ": " + what);
  }
  FnKind kindOf(int v) const { return f.code[size_t(v)].kind; }
  std::string show(int v) const {
    return ref(v) + " (" + fnKindName(kindOf(v)) + ")";
  }

  void header(std::string_view text) {
    line = 1;
    auto t = split(text, ' ');
    if (t.size() != 4 || t[0] != "rlhf.fn")
      fail("expected the header 'rlhf.fn 1 NAME MODE', got '" +
           std::string(text) + "'");
    f.fnName = std::string(t[2]);
    if (t[1] != "1" && t[1] != "2")
      fail("fn code version " + std::string(t[1]) +
           " is not supported; this runtime reads versions 1 and 2");
    version = t[1][0] - '0';
    if (t[3] != "host" && t[3] != "loss")
      fail("mode must be 'host' or 'loss', got '" + std::string(t[3]) + "'");
    f.fnMode = t[3] == "loss" ? Mode::Loss : Mode::Host;
  }

  void operand(Instr &in, std::string_view want, std::string_view tok,
               size_t pos) {
    std::string which = "operand " + std::to_string(pos + 1) + " of '" +
                        std::string(opName) + "' ";
    int64_t n = 0;
    if (want[0] == '%') {
      if (tok.empty() || tok[0] != '%' || !parseInt(tok.substr(1), n) || n < 0)
        fail(which + "must be a value %i, got '" + std::string(tok) + "'");
      int k = int(f.code.size());
      if (n == k)
        fail(ref(k) + " refers to itself");
      if (n > k)
        fail(std::string(tok) + " is used before it is defined (in " + ref(k) +
             ")");
      in.args.push_back(int(n));
    } else if (want == "KIND") {
      if (tok == "f1")
        in.kind = FnKind::PerSeq;
      else if (tok == "f2")
        in.kind = FnKind::PerToken;
      else if (tok == "tok")
        in.kind = FnKind::Tokens;
      else
        fail("input kind must be f1, f2 or tok, got '" + std::string(tok) +
             "'");
    } else if (want == "X") {
      std::string s(tok);
      char *end = nullptr;
      in.nums.push_back(s.empty() ? 0 : std::strtod(s.c_str(), &end));
      if (s.empty() || end != s.c_str() + s.size())
        fail(which + "must be a number, got '" + s + "'");
    } else {
      if (!parseInt(tok, n))
        fail(which + "must be an integer, got '" + std::string(tok) + "'");
      in.n.push_back(n);
    }
  }

  void value(const std::vector<std::string_view> &t) {
    const int k = int(f.code.size());
    int64_t got = -1;
    if (t[0].empty() || t[0][0] != '%')
      fail("expected '" + ref(k) + " = OP ...' or 'out NAME %i', got '" +
           std::string(t[0]) + "'");
    if (!parseInt(t[0].substr(1), got) || got != k)
      fail("values must be numbered in order from %0: expected " + ref(k) +
           ", got '" + std::string(t[0]) + "'");
    if (!f.outNames.empty())
      fail(ref(k) + " follows an 'out' line; outputs come last");
    if (t.size() < 3 || t[1] != "=")
      fail("expected '" + ref(k) + " = OP ...'");
    opName = t[2];
    const OpInfo *info = lookup(opName);
    if (!info)
      fail("unknown op '" + std::string(opName) + "'");
    auto want = split(info->usage, ' ');
    if (t.size() - 3 != want.size())
      fail("'" + std::string(opName) + "' takes " +
           std::to_string(want.size()) + " operand" +
           (want.size() == 1 ? "" : "s") + " (" + std::string(opName) + " " +
           std::string(info->usage) + "), got " + std::to_string(t.size() - 3));
    Instr in;
    in.op = info->op;
    in.line = line;
    for (size_t i = 0; i < want.size(); ++i)
      operand(in, want[i], t[i + 3], i);
    verify(in);
    f.code.push_back(std::move(in));
  }

  void output(const std::vector<std::string_view> &t) {
    if (t.size() != 3)
      fail("expected 'out NAME %i'");
    int64_t v = -1;
    if (t[2].empty() || t[2][0] != '%' || !parseInt(t[2].substr(1), v) ||
        v < 0 || v >= int64_t(f.code.size()))
      fail("output '" + std::string(t[1]) + "' must name a defined value %i, " +
           "got '" + std::string(t[2]) + "'");
    std::string name(t[1]);
    for (const std::string &o : f.outNames)
      if (o == name)
        fail("output '" + name + "' is named twice");
    if (kindOf(int(v)) == FnKind::Tokens)
      fail("output '" + name + "' is token ids; outputs are float values");
    if (f.fnMode == Mode::Loss) {
      // The first output is the loss; later ones are metrics, held to the
      // same shape so they add up over micro-batches too.
      const Instr &in = f.code[size_t(v)];
      const bool first = f.outNames.empty();
      const std::string what = first ? "the loss '" : "the metric '";
      if (in.kind != FnKind::Scalar)
        fail(what + name + "' must be rank 0, " + show(int(v)) +
             " is not");
      if (!in.sum)
        fail(what + name + "' (" + ref(int(v)) +
             ") is no batch reduction: reduce it with token_mean, token_sum, "
             "batch_mean or batch_sum");
      if (first && !in.model)
        fail(what + name + "' (" + ref(int(v)) +
             ") does not depend on the model");
    }
    f.outNames.push_back(std::move(name));
    f.outValues.push_back(int(v));
  }

  // Rank checks. `need` demands a kind of operand i.
  void need(const Instr &in, size_t i, FnKind k) const {
    if (kindOf(in.args[i]) != k)
      fail("'" + std::string(opName) + "' needs " + fnKindName(k) +
           " for operand " + std::to_string(i + 1) + ", " + show(in.args[i]) +
           " is not");
  }
  /// The result kind of elementwise operands: equal ranks or rank 0.
  FnKind elementwise(const std::vector<int> &args) const {
    FnKind hi = FnKind::Scalar;
    int at = -1;
    for (int a : args) {
      FnKind k = kindOf(a);
      if (k == FnKind::Tokens)
        fail("'" + std::string(opName) + "' cannot compute on token ids " +
             show(a));
      if (k == FnKind::Scalar)
        continue;
      if (at >= 0 && k != hi)
        fail("'" + std::string(opName) + "' mixes " + show(at) + " and " +
             show(a) + "; broadcast the rank-1 value first");
      hi = k, at = a;
    }
    return hi;
  }
  void literal(int64_t v, int64_t lo, const char *what) const {
    if (v < lo)
      fail(std::string(what) + " must be at least " + std::to_string(lo) +
           ", got " + std::to_string(v));
  }

  static bool isModelOp(Op op) { return op >= Op::Logprobs; }
  /// Reductions a loss cannot split over micro-batches.
  static bool wholeBatch(Op op) {
    return (op >= Op::GroupSum && op <= Op::GroupStd) || op == Op::BatchVar ||
           op == Op::BatchStd || op == Op::TokenVar || op == Op::TokenStd ||
           (op >= Op::GroupMax && op <= Op::TokenMin);
  }
  static bool batchSum(Op op) {
    return op == Op::BatchSum || op == Op::BatchMean || op == Op::TokenSum ||
           op == Op::TokenMean;
  }

  void verify(Instr &in) {
    const bool loss = f.fnMode == Mode::Loss;
    const std::string op(opName);
    if (isModelOp(in.op) && !loss)
      fail("'" + op + "' reads the model, which only a loss may do");
    if (loss && wholeBatch(in.op))
      fail("'" + op +
           "' is not allowed in a loss: it needs the whole batch, which "
           "micro-batches split");
    switch (in.op) {
    case Op::Input: {
      literal(in.n[0], 0, "the input index");
      if (in.n[0] >= (1 << 16))
        fail("input index " + std::to_string(in.n[0]) + " is too large");
      size_t i = size_t(in.n[0]);
      if (f.inputs.size() <= i)
        f.inputs.resize(i + 1, FnKind::Scalar);
      auto [it, fresh] = inputLine.emplace(in.n[0], line);
      if (!fresh)
        fail("input " + std::to_string(i) +
             " is declared twice, first at line " + std::to_string(it->second) +
             "; declare each input once");
      f.inputs[i] = in.kind;
      break;
    }
    case Op::Const:
      in.kind = FnKind::Scalar;
      break;
    case Op::RunningMean:
    case Op::RunningStd:
      if (loss)
        fail("'" + op +
             "' keeps statistics across calls, which only a host "
             "function may do; compute them before the train call");
      need(in, 0, FnKind::PerSeq);
      in.kind = FnKind::Scalar;
      break;
    case Op::AdaptiveKl:
    case Op::AdaptiveEntropy: {
      FnControl c;
      c.kind = in.op == Op::AdaptiveKl ? FnControl::Kind::Kl
                                       : FnControl::Kind::Entropy;
      c.init = in.nums[0];
      c.target = in.nums[1];
      std::optional<FnControl> &slot = f.ctls[size_t(c.kind)];
      if (slot)
        fail("a second '" + op + "'; a function adapts one such coefficient");
      double sum = 0; // finite when every operand is
      for (double x : in.nums)
        sum += x;
      // Written so that a nan fails too.
      if (c.kind == FnControl::Kind::Kl) {
        c.horizon = in.nums[2];
        if (!(c.init > 0) || !(c.target > 0) || !(c.horizon >= 1) ||
            !std::isfinite(sum))
          fail("'adaptive_kl' needs an initial value and a target above 0 "
               "and a horizon of at least 1, got " +
               numText(c.init) + " " + numText(c.target) + " " +
               numText(c.horizon));
      } else {
        c.delta = in.nums[2];
        c.max = in.nums[3];
        c.min = in.nums[4];
        if (!(c.target > 0) || !(c.delta > 0) || !(c.min >= 0) ||
            !(c.init >= c.min) || !(c.max >= c.init) || !std::isfinite(sum))
          fail("'adaptive_entropy' needs a target and a step above 0 and "
               "0 <= min <= init <= max, got " +
               numText(c.init) + " " + numText(c.target) + " " +
               numText(c.delta) + " " + numText(c.max) + " " + numText(c.min));
      }
      slot = c;
      in.kind = FnKind::Scalar;
      break;
    }
    case Op::Clamp: {
      in.kind = elementwise({in.args[0]});
      for (size_t i : {1, 2}) {
        FnKind k = kindOf(in.args[i]);
        if (k != FnKind::Scalar && k != in.kind)
          fail("'clamp' bound " + show(in.args[i]) +
               " must be rank 0 or the rank of " + show(in.args[0]));
      }
      break;
    }
    case Op::Broadcast:
      need(in, 0, FnKind::PerSeq);
      need(in, 1, FnKind::PerToken);
      in.kind = FnKind::PerToken;
      break;
    case Op::SeqVar:
    case Op::SeqStd:
    case Op::TokenVar:
    case Op::TokenStd:
      literal(in.n[0], 0, "the correction");
      [[fallthrough]];
    case Op::SeqSum:
    case Op::SeqMean:
    case Op::SeqMax:
    case Op::SeqMin:
    case Op::TokenSum:
    case Op::TokenMean:
    case Op::TokenMax:
    case Op::TokenMin: {
      need(in, 0, FnKind::PerToken);
      need(in, 1, FnKind::PerToken);
      const bool perSeq =
          in.op <= Op::SeqStd || in.op == Op::SeqMax || in.op == Op::SeqMin;
      in.kind = perSeq ? FnKind::PerSeq : FnKind::Scalar;
      if (loss && !perSeq && f.code[size_t(in.args[1])].model)
        fail("the mask of '" + op + "' (" + ref(in.args[1]) +
             ") depends on the model; a loss's token masks must come from "
             "its inputs");
      break;
    }
    case Op::GroupMax:
    case Op::GroupMin:
    case Op::GroupSum:
    case Op::GroupMean:
    case Op::GroupVar:
    case Op::GroupStd:
      literal(in.n[0], 1, "the group size");
      if (in.op == Op::GroupVar || in.op == Op::GroupStd) {
        literal(in.n[1], 0, "the correction");
        if (in.n[0] - in.n[1] < 1)
          fail("'" + op +
               "' divides by G - C = " + std::to_string(in.n[0] - in.n[1]) +
               ", which must be at least 1");
      }
      need(in, 0, FnKind::PerSeq);
      in.kind = FnKind::PerSeq;
      break;
    case Op::BatchVar:
    case Op::BatchStd:
      literal(in.n[0], 0, "the correction");
      [[fallthrough]];
    case Op::BatchSum:
    case Op::BatchMean:
    case Op::BatchMax:
    case Op::BatchMin:
      need(in, 0, FnKind::PerSeq);
      in.kind = FnKind::Scalar;
      break;
    case Op::Last:
    case Op::Next:
      need(in, 0, FnKind::PerToken);
      in.kind = FnKind::PerToken;
      break;
    case Op::NextMasked:
      need(in, 0, FnKind::PerToken);
      need(in, 1, FnKind::PerToken);
      in.kind = FnKind::PerToken;
      break;
    case Op::Rcumsum:
      need(in, 0, FnKind::PerToken);
      need(in, 1, FnKind::Scalar);
      need(in, 2, FnKind::PerToken);
      in.kind = FnKind::PerToken;
      break;
    case Op::MaskOf: {
      // The mask a call's input carries: token ids, or per-token values.
      const Instr &t = f.code[size_t(in.args[0])];
      if (t.kind != FnKind::Tokens && t.kind != FnKind::PerToken)
        fail("'mask_of' needs tok or a rank-2 input for operand 1, " +
             show(in.args[0]) + " is not");
      if (t.op != Op::Input)
        fail("'mask_of' reads the mask an input carries; " + show(in.args[0]) +
             " is computed, not an input");
      in.kind = FnKind::PerToken;
      break;
    }
    case Op::Logprobs:
    case Op::Values:
    case Op::Entropy:
    case Op::Score:
      need(in, 0, FnKind::Tokens);
      in.kind = in.op == Op::Score ? FnKind::PerSeq : FnKind::PerToken;
      break;
    default: // unary and binary elementwise ops, where
      in.kind = elementwise(in.args);
      break;
    }
    in.model = isModelOp(in.op);
    for (int a : in.args)
      in.model = in.model || f.code[size_t(a)].model;
    if (loss)
      linear(in);
  }

  /// A loss sums its value over micro-batches and ranks, so every batch
  /// reduction may only reach the output through sums and constant factors.
  void linear(Instr &in) {
    if (batchSum(in.op)) {
      in.sum = true;
      in.denom = f.numDenoms++;
      return;
    }
    auto sum = [&](size_t i) { return f.code[size_t(in.args[i])].sum; };
    auto constant = [&](size_t i) {
      return !sum(i) && kindOf(in.args[i]) == FnKind::Scalar;
    };
    bool any = false;
    for (size_t i = 0; i < in.args.size(); ++i)
      any = any || sum(i);
    if (!any)
      return;
    bool ok = (in.op == Op::Neg) ||
              ((in.op == Op::Add || in.op == Op::Sub) && sum(0) && sum(1)) ||
              (in.op == Op::Mul &&
               ((sum(0) && constant(1)) || (constant(0) && sum(1)))) ||
              (in.op == Op::Div && sum(0) && constant(1));
    if (!ok)
      fail("'" + std::string(opName) +
           "' uses a batch reduction in a loss other than in a sum scaled by "
           "constants; micro-batches add up their parts of a loss, so it "
           "must be linear in its batch reductions");
    in.sum = true;
  }

  void run(std::string_view code) {
    if (!code.empty() && code.back() == '\n')
      code.remove_suffix(1);
    auto lines = split(code, '\n');
    header(lines[0]);
    size_t first = 1;
    if (version >= 2 && lines.size() > 1 && lines[1].substr(0, 3) == "at ") {
      f.callSite = std::string(lines[1].substr(3));
      first = 2;
    }
    for (size_t i = first; i < lines.size(); ++i) {
      line = int(i + 1);
      if (lines[i].empty())
        fail("blank line");
      auto t = split(lines[i], ' ');
      for (std::string_view tok : t)
        if (tok.empty())
          fail("tokens must be separated by single spaces");
      if (t[0] == "out")
        output(t);
      else
        value(t);
    }
    if (f.outNames.empty())
      fail("no outputs; end with 'out NAME %i' lines");
    for (size_t i = 0; i < f.inputs.size(); ++i)
      if (!inputLine.count(int64_t(i))) {
        line = inputLine.rbegin()->second;
        fail("input " + std::to_string(i) + " is never declared; declare " +
             "every input 0.." + std::to_string(f.inputs.size() - 1) +
             ", unused ones too");
      }
    // A coefficient follows what the call measures: the KL, the entropy.
    for (const std::optional<FnControl> &c : f.ctls) {
      if (!c)
        continue;
      const Op op =
          c->kind == FnControl::Kind::Kl ? Op::AdaptiveKl : Op::AdaptiveEntropy;
      const int k = f.outputIndex(c->metric());
      for (const Instr &in : f.code)
        if (in.op == op)
          line = in.line;
      if (k < 0 || (f.fnMode == Mode::Loss && k == 0) ||
          f.outputKind(size_t(k)) != FnKind::Scalar)
        fail("'" + std::string(c->op()) + "' adapts to the " +
             FnControl::noun(c->kind) +
             " the function measures, but it has no rank-0 output '" +
             c->metric() + "'" +
             std::string(f.fnMode == Mode::Loss ? " after the loss" : ""));
    }
  }
};

std::string FnProgram::describe() const {
  return "fn '" + fnName + "'" +
         (callSite.empty() ? "" : " (called at " + callSite + ")");
}

FnProgram FnProgram::parse(std::string_view code) {
  FnProgram f;
  Parser{f}.run(code);
  return f;
}

int FnProgram::outputIndex(std::string_view name) const {
  for (size_t i = 0; i < outNames.size(); ++i)
    if (outNames[i] == name)
      return int(i);
  return -1;
}

bool FnProgram::keepsMoments() const {
  for (const Instr &in : code)
    if (in.op == Op::RunningMean || in.op == Op::RunningStd)
      return true;
  return false;
}

FnControl::State FnControl::next(State s, double m, int64_t rows) const {
  if (!std::isfinite(m))
    return s; // no measure: hold
  if (kind == Kind::Kl) {
    // Ziegler et al.'s proportional controller, as TRL's and verl's
    // AdaptiveKLController.
    const double err = std::clamp(m / target - 1.0, -0.2, 0.2);
    s.value *= 1.0 + err * double(rows) / horizon;
    return s;
  }
  // Skywork-OR1's EntController: a fixed step toward the target, and the
  // entropy term only while the entropy is under it.
  const bool low = m < target;
  s.value = std::clamp(s.value + (low ? delta : -delta), min, max);
  s.on = low;
  return s;
}

const char *FnControl::op(Kind k) {
  return k == Kind::Kl ? "adaptive_kl" : "adaptive_entropy";
}

const char *FnControl::metric(Kind k) {
  return k == Kind::Kl ? "kl" : "entropy";
}

const char *FnControl::noun(Kind k) { return k == Kind::Kl ? "KL" : "entropy"; }

FnKind FnProgram::outputKind(size_t i) const {
  return code.at(size_t(outValues.at(i))).kind;
}

bool FnProgram::readsModel(int64_t input) const {
  for (const Instr &in : code)
    if (Parser::isModelOp(in.op) && code[size_t(in.args[0])].n[0] == input)
      return true;
  return false;
}

std::vector<int64_t> FnProgram::modelInputs() const {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < numInputs(); ++i)
    if (readsModel(i))
      out.push_back(i);
  return out;
}
