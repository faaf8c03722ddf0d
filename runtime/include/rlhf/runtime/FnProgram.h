//===- FnProgram.h - user functions over batch tensors ----------*- C++ -*-===//
//
// Advantage estimators and losses written as typed tensor functions in the
// .rlhf language arrive as "fn code", a text the compiler embeds in the
// executable. This is its ABI, versions 1 and 2.
//
// One instruction per line, lines separated by '\n' (a final newline is
// optional, blank lines are errors), tokens separated by single spaces.
//
//   rlhf.fn V NAME MODE          header; V is 1 or 2, MODE `host` or `loss`
//   at FILE:LINE:COL             version 2 only, right after the header: the
//                                call site, which run-time errors name (the
//                                rest of the line, spaces and all)
//   %k = OP ARGS...              the k-th value, k = 0, 1, ... in order
//   out NAME %i                  outputs, after every value (at least one)
//
// ARGS are value references `%i` (i < k) or literal numbers. Every value has
// a rank the verifier computes: 0 scalar (a 0-d float tensor), 1 per
// sequence [N], 2 per token [N, T] with T = S-1 (aligned with the predicted
// tokens, like logprobs and loss masks), or `tok`: token ids [N, S].
//
//   input I KIND          KIND f1 [1], f2 [2] or tok; every input 0..n-1
//                         must be declared, each exactly once
//   const X               [0] a number (strtod)
//   adaptive_kl I T H     [0] a KL coefficient the run adapts (Ziegler et
//                         al. 2019): FnInputs::coefs, or I before the run
//                         sets one. After each call the run moves it
//                         toward making the output `kl` (a scalar the
//                         program must have; in a loss, a metric) equal T:
//                         coef *= 1 + clip(kl / T - 1, -0.2, 0.2) * N / H,
//                         N the batch's rows. At most one per program;
//                         I, T > 0, H >= 1
//   adaptive_entropy I T D MAX MIN
//                         [0] an entropy coefficient the run adapts
//                         (Skywork-OR1): FnInputs::coefs, or I before the
//                         run sets one. After each call whose output
//                         `entropy` was under T it rises by D, else it
//                         falls by D, within [MIN, MAX]; it applies (else
//                         0) while the last entropy was under T. At most
//                         one per program; T, D > 0, 0 <= MIN <= I <= MAX
//   running_mean %x, running_std %x
//                         [1] -> [0], host functions only: the mean
//                         (standard deviation, dividing by count - 1; 0
//                         before two rows) of every row of x the call site
//                         has seen over the run, this call's included
//                         (TRL's RunningMoments). FnInputs::running holds
//                         them; without it, this call's rows alone
//   neg exp log log1p expm1 sqrt abs sigmoid softplus stop_gradient %x
//                         rank of x; stop_gradient passes no gradient
//   add sub mul div min max lt le gt ge eq ne %a %b   equal ranks, or one
//                         rank 0; comparisons give 0/1; ranks 1 and 2 never
//                         mix (`broadcast` first); tok is never arithmetic
//   where %c %a %b        c != 0 ? a : b, ranks as above
//   clamp %x %lo %hi      lo, hi rank 0 or the rank of x
//   broadcast %x %like    [1] -> [2] shaped like `like`
//   seq_sum %x %m, seq_mean %x %m, seq_var %x %m C, seq_std %x %m C
//                         [2] -> [1] masked per row; mean = sum(x*m) /
//                         max(sum(m), 1), var = sum(m*(x-mean)^2) /
//                         max(sum(m)-C, 1), std = sqrt(var)
//   group_sum %x G, group_mean %x G, group_var %x G C, group_std %x G C
//                         [1] -> [1] over groups of G consecutive rows, each
//                         row replaced by its group's statistic; var divides
//                         by G-C >= 1 (at::var's correction)
//   batch_sum %x, batch_mean %x, batch_var %x C, batch_std %x C
//                         [1] -> [0]; var divides by max(N-C, 1)
//   token_sum %x %m, token_mean %x %m, token_var %x %m C, token_std %x %m C
//                         [2] -> [0] over all masked tokens, as seq_*
//   seq_max, seq_min, group_max, group_min, batch_max, batch_min, token_max,
//   token_min             as the sums: the largest (smallest) value, of the
//                         masked ones for seq_ and token_ (0 where there is
//                         none); batch_ and token_ ones not in losses
//   last %m               [2] 1 at each row's last position with m != 0
//   next %x               [2] out[:, t] = x[:, t+1], 0 at the end
//   next_masked %x %m     [2] out[:, t] = x[:, u], u the next position after
//                         t with m[:, u] != 0 (0 if none)
//   rcumsum %x %g %m      [2] discounted reverse cumulative sum (GAE's),
//                         g rank 0: out[:, t] = x[:, t] + g * out[:, u] where
//                         m[:, t] != 0, u the next such position (0 if none),
//                         and 0 where m[:, t] = 0
//   mask_of %t            [2] the mask input t carries: of a tok input its
//                         loss mask (the generation mask, else its non-pad
//                         predicted tokens), of an f2 input the mask of the
//                         call that produced it (an error when it has none);
//                         t is an `input` value
//   logprobs %t, values %t, entropy %t   [2]; score %t   [1]
//                         the trained model's outputs on tok value t; only
//                         in a loss: at t the logprob of token t+1, the
//                         value head at position t, the entropy of the
//                         prediction at t; score is the value head at token
//                         t+1 of each row's last t with mask_of(t) != 0 (0
//                         for an empty row), as the reward model's loss
//
// A loss's first output is the loss, a scalar that depends on the model;
// further outputs are metrics of the train call (scalars the same shape as
// a loss, recorded without a gradient). Its batch reductions (token_sum,
// token_mean, batch_sum, batch_mean) run per micro-batch as a local sum over
// D, where D is fixed per minibatch over all its rows on every dp rank (the
// mask total for token_mean, the row count for batch_mean, 1 for the sums):
// the sum over micro-batches and ranks is the minibatch's value. So a loss
// must be a sum of batch reductions scaled by constants, the masks of its
// token reductions must not depend on the model, and the reductions that
// need the whole batch at once (batch_var, batch_std, token_var, token_std,
// group_*) are not allowed; per-row ones (seq_*) are.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_FNPROGRAM_H
#define RLHF_RUNTIME_FNPROGRAM_H

#include <ATen/ATen.h>

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlhf {

/// The static type of an fn value: its rank, or token ids.
enum class FnKind : uint8_t {
  Scalar,   ///< rank 0
  PerSeq,   ///< rank 1, [N]
  PerToken, ///< rank 2, [N, T]
  Tokens,   ///< tok, [N, S] int64
};

/// "rank 0", "rank 1", "rank 2" or "tok".
const char *fnKindName(FnKind k);

struct FnRunning;

/// The run's values of a program's adaptive coefficients, by
/// FnControl::Kind.
using FnCoefs = std::array<std::optional<double>, 2>;

/// What a function is applied to. Float inputs are fp32 (bool converts);
/// token inputs are integer ids.
struct FnInputs {
  std::vector<at::Tensor> tensors;
  /// Per input, the mask it carries, [N, T] like per-token values
  /// (undefined, or a shorter vector: none; mask_of of a token input then
  /// takes its non-pad predicted tokens).
  std::vector<at::Tensor> masks;
  int64_t pad = 0; ///< the tokenizer's pad id
  /// A loss's weight per row, [N] (undefined: 1 each): its batch
  /// reductions and their denominators count row r `rowWeights[r]` times.
  /// Evaluation gives the rows padding a short last batch weight 0, so that
  /// the loss is that of the real rows alone.
  at::Tensor rowWeights;
  /// The values of the program's adaptive coefficients, by
  /// FnControl::Kind (unset: their initial values).
  FnCoefs coefs;
  /// The call site's running moments (running_mean, running_std), which
  /// evaluate adds this call's rows to; null: this call's rows alone.
  FnRunning *running = nullptr;
  /// Read `running` without adding to it (an evaluation); with none yet,
  /// this call's rows stand in.
  bool holdRunning = false;
};

/// The running moments of one value over a call site's calls: rows, mean,
/// and the sum of squared deviations from it (Chan et al.'s merge).
struct FnMoments {
  double count = 0, mean = 0, m2 = 0;
  /// Adds the rows of `x`.
  void add(const at::Tensor &x);
  /// The standard deviation over count - 1; 0 before two rows.
  double stdDev() const;
};

/// A call site's running moments, by the id of the value they follow.
struct FnRunning {
  std::map<int, FnMoments> moments;
};

/// A coefficient the run adapts between steps from a metric of the call
/// that uses it: `adaptive_kl I T H` follows the output `kl` (Ziegler et
/// al. 2019, TRL's and verl's AdaptiveKLController), `adaptive_entropy I T
/// D MAX MIN` the output `entropy` (Skywork-OR1's adaptive entropy
/// control).
struct FnControl {
  enum class Kind : uint8_t { Kl, Entropy };
  Kind kind = Kind::Kl;
  double init = 0, target = 0;
  double horizon = 0;                 ///< Kl: rows over which it adapts
  double delta = 0, max = 0, min = 0; ///< Entropy: its step and bounds
  /// What the run keeps between steps: the coefficient, and (Entropy)
  /// whether it applies, the last entropy having been under the target.
  struct State {
    double value = 0;
    bool on = true;
  };
  State start() const { return {init, true}; }
  /// The value a call uses.
  static double coefficient(const State &s) { return s.on ? s.value : 0.0; }
  /// The state after a call whose metric() was `m`, over `rows` rows.
  State next(State s, double m, int64_t rows) const;
  /// Its op (`adaptive_kl`), the output it follows (`kl`) and what that
  /// measures (`KL`), by kind.
  static const char *op(Kind k);
  static const char *metric(Kind k);
  static const char *noun(Kind k);
  const char *op() const { return op(kind); }
  const char *metric() const { return metric(kind); }
};

/// The trained model's raw output for the token input `input` (whose ids
/// are `tokens`): logits [N, S, V] of an lm head or values [N, S] of a value
/// head.
using FnModel =
    std::function<at::Tensor(int64_t input, const at::Tensor &tokens)>;

/// An lm head's per-token log-probs and entropies, [N, S-1] each, for the
/// token input `input`, each only where asked for (else undefined): what
/// `logprobs` and `entropy` read, for a model that computes them without
/// whole logits (LlamaModel::tokenStats, or headStats on a pipeline's last
/// stage). Asked once per input, for every statistic the program
/// reads of it, so both come from one forward pass. Without it they come
/// from FnModel's logits. `entropyGrad` is false where the entropy reaches
/// only metrics, not the loss: no gradient need flow through it.
using FnTokenStat = std::function<std::pair<at::Tensor, at::Tensor>(
    int64_t input, const at::Tensor &tokens, bool logprobs, bool entropy,
    bool entropyGrad)>;

/// A parsed and verified fn program (see the file comment).
class FnProgram {
public:
  enum class Mode : uint8_t { Host, Loss };

  /// Parses and verifies `code`; an rlhf::Error names the function, the line
  /// and what is wrong.
  static FnProgram parse(std::string_view code);

  const std::string &name() const { return fnName; }
  /// "fn 'NAME'" and, with a call site, " (called at FILE:LINE:COL)".
  std::string describe() const;
  Mode mode() const { return fnMode; }
  int64_t numInputs() const { return int64_t(inputs.size()); }
  FnKind inputKind(int64_t i) const { return inputs.at(size_t(i)); }
  const std::vector<std::string> &outputNames() const { return outNames; }
  FnKind outputKind(size_t i) const;
  /// Whether model ops (logprobs, values, score, entropy) read token input
  /// `input`.
  bool readsModel(int64_t input) const;
  /// The token inputs model ops read, ascending.
  std::vector<int64_t> modelInputs() const;
  /// Whether it reads running moments (running_mean, running_std).
  bool keepsMoments() const;
  /// Its `adaptive_kl` and `adaptive_entropy`, by FnControl::Kind.
  const std::array<std::optional<FnControl>, 2> &controls() const {
    return ctls;
  }
  /// The index of output `name` in outputNames(), or -1.
  int outputIndex(std::string_view name) const;

  /// A loss's D per batch reduction, in program order, over the rows of
  /// `in` (the caller sums them over dp): the mask total for token_mean,
  /// the rows for batch_mean, 0 for the sums (their D is 1 whatever the
  /// entry). Reads no model. Empty for host functions.
  std::vector<double> localDenominators(const FnInputs &in) const;

  /// The outputs, in the order of outputNames(). A loss needs `model`; its
  /// batch reductions divide by `denominators` (from localDenominators
  /// summed over dp), or, when null, by those of `in` alone. Host functions
  /// run without gradients; a loss keeps the model's graph.
  std::vector<at::Tensor>
  evaluate(const FnInputs &in, const FnModel *model = nullptr,
           const std::vector<double> *denominators = nullptr,
           const FnTokenStat *tokenStat = nullptr) const;

private:
  // Each reduction family lists sum, mean, var, std in this order.
  enum class Op : uint8_t {
    Input,
    Const,
    AdaptiveKl,
    AdaptiveEntropy,
    RunningMean,
    RunningStd,
    Neg,
    Exp,
    Log,
    Log1p,
    Expm1,
    Sqrt,
    Abs,
    Sigmoid,
    Softplus,
    StopGradient,
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    Where,
    Clamp,
    Broadcast,
    SeqSum,
    SeqMean,
    SeqVar,
    SeqStd,
    GroupSum,
    GroupMean,
    GroupVar,
    GroupStd,
    BatchSum,
    BatchMean,
    BatchVar,
    BatchStd,
    TokenSum,
    TokenMean,
    TokenVar,
    TokenStd,
    SeqMax,
    SeqMin,
    GroupMax,
    GroupMin,
    BatchMax,
    BatchMin,
    TokenMax,
    TokenMin,
    Last,
    Next,
    NextMasked,
    Rcumsum,
    MaskOf,
    Logprobs,
    Values,
    Score,
    Entropy
  };
  struct Instr {
    Op op;
    int line = 0;           ///< 1-based, for errors
    std::vector<int> args;  ///< value operands
    std::vector<int64_t> n; ///< integer literals (input index, G, C)
    std::vector<double> nums; ///< number literals (const's value)
    FnKind kind = FnKind::Scalar;
    bool model = false; ///< depends on the model's outputs
    bool sum = false;   ///< (loss) a batch reduction or a linear function of
                        ///< them: summed over micro-batches
    int denom = -1;     ///< (loss) index of a batch reduction's D
  };
  struct Parser;
  struct Eval;

  std::string fnName, callSite;
  Mode fnMode = Mode::Host;
  std::vector<Instr> code;
  std::vector<FnKind> inputs;
  std::vector<std::string> outNames;
  std::vector<int> outValues;
  int numDenoms = 0;
  std::array<std::optional<FnControl>, 2> ctls;
};

} // namespace rlhf

#endif // RLHF_RUNTIME_FNPROGRAM_H
