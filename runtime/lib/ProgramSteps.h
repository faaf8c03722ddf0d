//===- ProgramSteps.h - what a run carries from step to step ----*- C++ -*-===//
//
// Beside the models, the executor keeps state from one step to the next
// for its functions (adaptive KL coefficients, running moments: FnState in
// SamplingState.h, saved in program.json) and for --log-samples. Their
// entry points, and the step's metrics as every rank gathered them, which
// both read.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_LIB_PROGRAMSTEPS_H
#define RLHF_RUNTIME_LIB_PROGRAMSTEPS_H

#include "ProgramState.h"

namespace rlhf::exec {

/// --log-samples: a generation's `seq`, the first of the step is kept.
void noteGenerated(rlhf_prog *p, rlhf_value *seq);
/// --log-samples: a reward of the kept generation's rows: a host reward
/// (`host`, which compared them with `answer`, one row per prompt) or a
/// frozen reward model's score.
void noteReward(rlhf_prog *p, rlhf_value *score, bool host,
                rlhf_value *answer = nullptr);
/// --log-samples: appends the kept generation, decoded, with its reward
/// (rows from `firstRow` on, the first `rows` of them, all when negative)
/// to OUT/samples/FILE, and forgets it. Collective: every rank calls it.
void writeSamples(rlhf_prog *p, const std::string &file, int64_t step,
                  int64_t firstRow, int64_t rows);

/// Metric slot `slot` of a step as every rank gathered them (`gathered`,
/// [ranks, 2 * slots + 1]: value/valid pairs, then whether the rank was
/// asked to stop): the mean over the ranks that
/// recorded it, or none; the slowest rank's for a time. The same numbers
/// and arithmetic on every rank give every rank the same value.
inline std::optional<double> combinedMetric(const at::Tensor &gathered,
                                            size_t slot, bool isTime) {
  at::Tensor vals = gathered.select(1, int64_t(2 * slot)),
             valid = gathered.select(1, int64_t(2 * slot + 1));
  const double n = valid.sum().item<double>();
  if (n == 0)
    return std::nullopt;
  return isTime ? (vals * valid).max().item<double>()
                : (vals * valid).sum().item<double>() / n;
}

/// The running moments of `f`'s call site (null for a function without
/// running_mean or running_std).
FnRunning *runningAt(rlhf_prog *p, const FnProgram &f);

/// program.json's record of what functions keep across steps, and taking
/// it back on --resume (before the first call).
nlohmann::json fnStateJson(const rlhf_prog *p);
void restoreFnState(rlhf_prog *p, const nlohmann::json &j);

/// The values of `f`'s adaptive coefficients (adaptive_kl,
/// adaptive_entropy) for this call. A call of a step, not an evaluation's,
/// then says with noteMeasured where its `kl` or `entropy` went.
FnCoefs coefsAt(rlhf_prog *p, const FnProgram &f);

/// Logs them as `kl_coef` and `entropy_coef`, with `suffix` ("/actor").
void recordCoefs(rlhf_prog *p, const FnProgram &f, const FnCoefs &coefs,
                 const std::string &suffix, bool member);

/// `f`'s call logged its output `output` into metric slot `slot`, over
/// `rows` rows: the measure of its coefficient that follows it, if any.
void noteMeasured(rlhf_prog *p, const FnProgram &f, const std::string &output,
                  size_t slot, int64_t rows);

/// At the end of a step: moves each adaptive coefficient a call of the
/// step measured, by the `kl` or `entropy` combined over ranks (`gathered`,
/// the step's metric slots as every rank gathered them, as combinedMetric
/// reads them), and warns of resumed state that no call took.
void endStepFnState(rlhf_prog *p, const at::Tensor &gathered);

} // namespace rlhf::exec

#endif // RLHF_RUNTIME_LIB_PROGRAMSTEPS_H
