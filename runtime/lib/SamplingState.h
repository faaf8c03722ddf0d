//===- SamplingState.h - generation's state beyond one call -----*- C++ -*-===//
//
// Private to runtime/lib (ProgramState.h includes it): what the executor
// keeps about sampling across calls and steps. An asynchronous generator's
// own weights and the samples it made ahead (ProgramAsync.cpp), dynamic
// sampling's rounds (ProgramFilter.cpp), held-out evaluation's scores
// (ProgramEval.cpp), what functions keep across steps (ProgramFns.cpp) and
// the samples --log-samples writes (ProgramSamples.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_LIB_SAMPLINGSTATE_H
#define RLHF_RUNTIME_LIB_SAMPLINGSTATE_H

#include "rlhf/runtime/rlhf_program.h"

#include "rlhf/runtime/FnProgram.h"
#include "rlhf/runtime/Groups.h"
#include "rlhf/runtime/Model.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rlhf::exec {

/// How a generate call samples; an asynchronous generator repeats it for
/// later iterations.
struct GenerateSpec {
  int64_t maxNew = 0, n = 1;
  double temperature = 1.0, topP = 1.0;
  bool greedy = false;
  std::string label;
  /// A dp rank's rows are generated in this many waves, one after another,
  /// each with a KV cache of its own rows only (the plan's mbs).
  int64_t waves = 1;
};

/// One iteration's samples as a generate call returns them: this rank's
/// rows (undefined off the generator's mesh) of `rows` in all.
struct GeneratedBatch {
  at::Tensor prompts, seq, logprobs, mask;
  int64_t rows = 0;
};

/// The generator of a model trained with staleness k (ProgramAsync.cpp): its
/// own copy of the weights in its own layout, a version behind the trainer
/// at most k, and the samples it made ahead for later iterations. Every
/// rank tracks the same versions and steps; only the generator's ranks hold
/// tensors.
struct AsyncGenerator {
  bool active = false;
  Layout layout;
  ParamMap params;
  int64_t version = -1; ///< trainer steps the copy has seen (-1: none yet)
  int64_t staleness = 0;
  int64_t dataset = -1;
  std::string promptField;
  GenerateSpec spec;
  std::map<int64_t, GeneratedBatch> ahead; ///< by iteration
};

/// Dynamic sampling's rows of the current iteration, round by round
/// (ProgramFilter.cpp).
struct FilterState {
  struct Round {
    std::vector<rlhf_value *> values;  ///< gathered on every rank
    std::vector<int64_t> varied, flat; ///< prompt indices
  };
  std::vector<Round> rounds;
  std::vector<rlhf_value *> kept; ///< after the last round
  size_t roundMetrics = 0;        ///< metric slots before this round's
  // Over the run, for the end-of-run report.
  int64_t iterations = 0, roundsDone = 0, filledIterations = 0,
          filledGroups = 0, drawn = 0;
  double expected = 1;
  bool warnedFill = false;
};

/// Held-out evaluation (ProgramEval.cpp): the compiled eval function runs
/// the iteration's scoring ops on each batch of a dataset, and the runtime
/// averages each score over the dataset's rows.
struct EvalState {
  int64_t dataset = -1, interval = 0;
  void (*body)(rlhf_prog *, int64_t) = nullptr;
  int64_t samples = 1;       ///< per prompt
  double predictedBatch = 0; ///< the plan's seconds per batch
  /// While a batch runs: what its generates are seeded by (samplingStep).
  std::optional<int64_t> seedStep;
  /// This run's evaluations: how many, their batches and seconds.
  int64_t passes = 0, batches = 0;
  double seconds = 0;
  int64_t realRows = 0; ///< of the batch running (the rest wrap around)
  /// The data_source of each row of the batch running ("" for none).
  std::vector<std::string> rowSources;
  /// Row `row`'s data_source, "" for none.
  std::string sourceOf(int64_t row) const {
    return size_t(row) < rowSources.size() ? rowSources[size_t(row)] : "";
  }
  struct Tally {
    double sum = 0, best = 0; ///< over samples; of each prompt's best
    double majority = 0;      ///< of each prompt's majority vote (maj@k)
    int64_t rows = 0, prompts = 0;
  };
  struct Score {
    std::string label;
    Tally all;
    /// The same over the prompts of each data_source.
    std::map<std::string, Tally> bySource;
    /// A validation loss or metric: `all.sum` adds each batch's value times
    /// its real rows, and there is no best@k.
    bool loss = false;
    /// Its scores came with predictions (exact_match's): maj@k is reported.
    bool voted = false;
  };
  std::vector<Score> scores; ///< by their order in the eval function
  size_t cursor = 0;
  /// Steps whose evaluation eval.jsonl already holds (a resumed run).
  std::set<int64_t> logged;
};

/// --log-samples (ProgramSamples.cpp): the step's (or eval batch's) first
/// generation and its reward, until they are written.
struct SampleLog {
  int64_t interval = 0; ///< steps between files; 0: off
  rlhf_value *seq = nullptr;
  rlhf_value *score = nullptr;
  bool hostScore = false; ///< a host reward's, not a reward model's
  rlhf_value *answer = nullptr; ///< the answers a host reward compared with
};

/// What functions written in the language keep across steps
/// (ProgramFns.cpp): adaptive KL coefficients and running moments, one set
/// per call site, by FnProgram::describe(). Every rank holds the same: host
/// functions see the same rows on every rank, and a coefficient moves at
/// the end of a step by metrics every rank has gathered. Checkpoints save
/// them in program.json.
struct FnState {
  struct Coef {
    FnControl ctl;
    FnControl::State state;
    /// This step's measure: its metric slot and the batch's rows.
    std::optional<std::pair<size_t, int64_t>> measured;
  };
  /// By the kind of coefficient (FnControl::Kind) and the call site.
  using CoefKey = std::pair<int, std::string>;
  std::map<CoefKey, Coef> coefs;
  std::map<std::string, FnRunning> running;
  /// A resumed run's, taken by each call site at its first call.
  std::map<CoefKey, FnControl::State> resumedCoefs;
  std::map<std::string, FnRunning> resumedRunning;
};

} // namespace rlhf::exec

#endif // RLHF_RUNTIME_LIB_SAMPLINGSTATE_H
