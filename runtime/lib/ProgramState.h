//===- ProgramState.h - the executor's state, shared by its parts -*- C++
//-*-===//
//
// Private to runtime/lib: the executor behind rlhf_program.h is split by
// concern into Program.cpp (a run's life: start, steps, metrics,
// checkpoints, datasets), ProgramValues.cpp (where batch values live and how
// they move between layouts), ProgramCalls.cpp (model calls,
// reallocations, transfers and host functions), ProgramAsync.cpp (a
// generator that runs ahead of training), ProgramFilter.cpp (dynamic
// sampling), ProgramEval.cpp (held-out evaluation) and ProgramFns.cpp
// (functions written in the language, as fn code). They share this state;
// SamplingState.h holds what generation keeps beyond one call.
//
// Batch values are either replicated on every rank (dataset batches,
// host-computed tensors) or split by rows over the data-parallel groups of
// the layout that produced them (model call results). Per-token tensors
// follow the runtime's convention: S-1 columns aligned with the predicted
// tokens, with a loss mask carried beside them.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_LIB_PROGRAMSTATE_H
#define RLHF_RUNTIME_LIB_PROGRAMSTATE_H

#include "rlhf/runtime/rlhf_program.h"

#include "CommWatchdog.h"
#include "SamplingState.h"
#include "rlhf/runtime/CharTokenizer.h"
#include "rlhf/runtime/Checkpoint.h"
#include "rlhf/runtime/Dataset.h"
#include "rlhf/runtime/Device.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/ExternalReward.h"
#include "rlhf/runtime/FnProgram.h"
#include "rlhf/runtime/Groups.h"
#include "rlhf/runtime/HostCompute.h"
#include "rlhf/runtime/Model.h"
#include "rlhf/runtime/Realloc.h"
#include "rlhf/runtime/Tokenizer.h"
#include "rlhf/runtime/Trace.h"
#include "rlhf/runtime/Train.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <getopt.h>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <sys/resource.h>

// A private header of the executor's files: its structs are global (the
// C API's opaque types) and name the runtime's types unqualified.
using namespace rlhf;

namespace rlhf::exec {
using Clock = std::chrono::steady_clock;
} // namespace rlhf::exec

struct rlhf_value {
  // A record, or one tensor.
  std::map<std::string, rlhf_value *> fields;
  bool isRecord = false;
  at::Tensor t;     ///< this rank's rows (all rows when replicated)
  at::Tensor mask;  ///< [rows, S-1] loss mask of a token tensor, if any
  int64_t rows = 0; ///< rows over all ranks
  std::optional<rlhf::Layout> layout; ///< unset: replicated on every rank
  /// A dataset column's rows as text, for host functions that read text.
  std::shared_ptr<const std::vector<rlhf::Example>> examples;
  /// A score's rows' predictions (exact_match's generated tokens), for
  /// evaluation's majority vote (maj@k).
  std::shared_ptr<const std::vector<std::string>> predictions;
};

namespace rlhf::exec {

struct ModelState {
  std::string name;
  ModelConfig cfg;
  bool trainable = false;
  AdamSettings adam;
  std::string checkpoint;
  Layout layout, initial;
  ParamMap params;
  /// An ema target's fp32 weights in low-precision runs, laid out as
  /// `params` (their rounding): a blend of 1 - decay = 0.005 is below
  /// bf16's resolution, so blending the bf16 weights would barely move them.
  ParamMap master;
  std::unique_ptr<Adam> opt;
  Layout optLayout;
  bool changed = false;   ///< trained or moved by ema: saved in checkpoints
  ParamMap host;          ///< host copy of an offloaded model's shard
  bool offloaded = false; ///< params freed; `host` holds the weights
  at::Device workDevice = at::kCPU; ///< where the params go when loaded
  int64_t trainCalls = 0; ///< counted on every rank: moments exist once > 0
  AsyncGenerator gen;     ///< with staleness > 0 and a generator layout
};

struct DatasetState {
  std::string name, path;
  int64_t batch = 0, promptLen = 0, responseLen = 0;
  std::vector<std::string> fields;
  std::optional<PromptTemplate> promptTemplate; ///< renders `prompt`
  std::unique_ptr<JsonlDataset> data;
  std::set<std::string> warnedCut; ///< fields whose cut rows were reported
  /// Rows dynamic sampling drew beyond a batch per step so far: step s
  /// reads from row s * batch + skipped (a checkpoint keeps it, in
  /// program.json).
  int64_t skipped = 0;
};

/// One number of the progress line and metrics file. Every rank records
/// the same slots in the same order (the program is the same everywhere).
struct Metric {
  std::string key;
  double value = 0;
  bool valid = false;
  bool isTime =
      false; ///< max over ranks; others are averaged over ranks that have them
};

inline bool sameLayout(const Layout &a, const Layout &b) {
  return a.firstGpu == b.firstGpu && a.dp == b.dp && a.tp == b.tp &&
         a.pp == b.pp;
}

inline std::string layoutStr(const Layout &l) {
  return "gpus [" + std::to_string(l.firstGpu) + ", " +
         std::to_string(l.firstGpu + l.size()) +
         ") dp=" + std::to_string(l.dp) + " tp=" + std::to_string(l.tp) +
         " pp=" + std::to_string(l.pp);
}

/// The "key=value,..." settings of a call, as code generation writes them:
/// numbers, and text as key="..." with %XX escapes (rlhf_program.h).
class Settings {
public:
  explicit Settings(const char *text) {
    std::stringstream ss(text ? text : "");
    std::string item;
    while (std::getline(ss, item, ','))
      if (auto eq = item.find('='); eq != std::string::npos) {
        std::string v = item.substr(eq + 1);
        if (v.size() >= 2 && v.front() == '"' && v.back() == '"')
          texts[item.substr(0, eq)] = unescape(v.substr(1, v.size() - 2));
        else
          values[item.substr(0, eq)] = std::stod(v);
      }
  }
  bool has(const std::string &key) const { return values.count(key) != 0; }
  bool hasText(const std::string &key) const { return texts.count(key) != 0; }
  std::string text(const std::string &key) const {
    auto it = texts.find(key);
    if (it == texts.end())
      throw Error("setting '" + key + "' is missing");
    return it->second;
  }
  double get(const std::string &key, double fallback) const {
    auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
  }
  double need(const std::string &key) const {
    auto it = values.find(key);
    if (it == values.end())
      throw Error("setting '" + key + "' is missing");
    return it->second;
  }

private:
  static std::string unescape(const std::string &s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == '%' && i + 2 < s.size()) {
        out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        out += s[i];
      }
    return out;
  }
  std::map<std::string, double> values;
  std::map<std::string, std::string> texts;
};

/// `label` and, where the lowering recorded it, the call's place in its
/// .rlhf file: "script_reward (grpo.rlhf:38:3)", for errors and warnings.
inline std::string calledAt(const std::string &label, const Settings &s) {
  return s.hasText("at") ? label + " (" + s.text("at") + ")" : label;
}

inline std::vector<std::string> splitList(const std::string &s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty())
      out.push_back(item);
  return out;
}

/// Where a whole sequence [N, S] has real tokens to predict: [N, S-1],
/// aligned with per-token logprobs (the loss mask of text without a
/// generation mask).
inline at::Tensor predictedTokens(const at::Tensor &seq, int64_t pad) {
  return seq.narrow(1, 1, seq.size(1) - 1) != pad;
}

inline uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^
               (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

inline double peakRssBytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) * 1024.0; // Linux reports KiB
}

} // namespace rlhf::exec

using namespace rlhf::exec;

struct rlhf_prog {
  // Settings from the generated constants and the command line.
  std::string name;
  int64_t steps = 0, seed = 0, saveInterval = 0, gpus = 0;
  /// --keep-checkpoints: the newest this many checkpoints stay; 0: all.
  int64_t keepCheckpoints = 0;
  /// Stopped on request (SIGUSR1) before the run's last step.
  bool stoppedEarly = false;
  double predictedIteration = 0;
  std::vector<double> predictedMemory;
  std::string plannedHardware; ///< the cluster's hardware; empty if unknown
  std::string outDir, resumeFrom, tracePath;
  std::string exportHfDir; ///< --export-hf: trained models go here at the end
  /// --export-dtype: bf16 or fp32; unset: the run's weight dtype.
  std::optional<bool> exportBf16;
  std::unique_ptr<MeasuredTrace> trace; ///< with --trace
  /// The allocator's peak per timed span and over the run (from start).
  std::optional<SpanPeaks> peaks;
  bool resume = false, overwrite = false, quiet = false;
  std::map<std::string, std::string> dataOverride;

  std::unique_ptr<Communicator> world;
  int rank = -1;
  /// Where model state lives (RLHF_DEVICE); batch values stay on the host.
  c10::Device device = c10::kCPU;
  /// The weights' dtype (RLHF_PRECISION); master weights and Adam's moments
  /// are fp32 whatever it is.
  at::ScalarType weightDtype = at::kFloat;
  double commTimeoutS = 300; ///< RLHF_COMM_TIMEOUT_MS, in seconds
  at::TensorOptions weightOpts() const {
    return at::TensorOptions().dtype(weightDtype).device(device);
  }
  at::TensorOptions fp32Opts() const {
    return at::TensorOptions().dtype(at::kFloat).device(device);
  }
  std::vector<ModelState> models;
  std::vector<DatasetState> datasets;
  std::string tokenizerPath; ///< a sentencepiece model, or "" for characters
  std::unique_ptr<TextTokenizer> tokenizer;
  nlohmann::json tokenizerId; ///< tokenizerIdentity's, once asked for
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, ParallelGroups>
      groups;
  /// USP's Ulysses and ring sub-groups of an sp layout's sp groups, by
  /// rows layout and ring size.
  std::map<
      std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>,
      std::pair<std::unique_ptr<Communicator>, std::unique_ptr<Communicator>>>
      seqGroups;
  Layout replicated; ///< every rank, all rows

  /// script_reward's worker pools (rank 0 only), by their settings; they
  /// live until the program is deleted, which stops them.
  std::map<std::string, std::unique_ptr<ExternalRewardPool>> rewardPools;

  /// Parsed fn programs by the address of their code (a constant of the
  /// compiled program), with the text to tell a reused address.
  std::map<const char *, std::pair<std::string, FnProgram>> fnPrograms;

  std::deque<rlhf_value> values; ///< this step's values
  FilterState filter;
  EvalState eval;
  FnState fnState;
  SampleLog samples;
  std::vector<Metric> metrics;
  size_t metricCursor = 0;
  Clock::time_point stepStart, runStart;
  int64_t firstStep = 0, stepIndex = 0;
  int64_t resumedFrom = -1; ///< the checkpoint's step, when resumed

  ParallelGroups &groupsOf(const Layout &l) {
    auto key = std::make_tuple(l.firstGpu, l.dp, l.tp, l.pp);
    auto it = groups.find(key);
    if (it == groups.end())
      it = groups.emplace(key, makeGroups(*world, l)).first;
    return it->second;
  }

  rlhf_value *newValue() { return &values.emplace_back(); }

  void record(const std::string &key, double v, bool valid,
              bool isTime = false) {
    if (metricCursor == metrics.size())
      metrics.push_back({key, 0, false, isTime});
    Metric &m = metrics[metricCursor++];
    m.key = key;
    m.value = v;
    m.valid = valid;
    m.isTime = isTime;
  }
};

namespace rlhf::exec {

[[noreturn]] inline void die(const rlhf_prog *p, std::string msg) {
  // A collective that failed after its call returned (the NCCL watchdog's
  // find) is the cause of whatever this rank then tripped over.
  if (std::string cause = asyncCommFailure();
      !cause.empty() && msg.find(cause) == std::string::npos)
    msg = cause + " (this rank then failed in " + msg + ")";
  std::fflush(stdout);
  // Before the rendezvous (its options, run without rlhf-run) there is no
  // rank to name: the program is named instead.
  if (p && p->rank >= 0)
    std::fprintf(stderr, "rank %d: error: %s\n", p->rank, msg.c_str());
  else
    std::fprintf(stderr, "%s: error: %s\n", p ? p->name.c_str() : "rlhf",
                 msg.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

/// Runs an entry point; a failure ends this rank (and so the job), its
/// message led by `what` as it reads then (`f` may add where the call is).
template <typename F>
auto guarded(rlhf_prog *p, const std::string &what, F &&f) {
  try {
    return f();
  } catch (const c10::Error &e) { // without LibTorch's C++ backtrace
    die(p, what + ": " + e.what_without_backtrace());
  } catch (const std::exception &e) {
    die(p, what + ": " + e.what());
  }
}

/// Layout arrays of compiled programs are {first GPU, dp, tp, pp,
/// micro-batches, sp, ring} (rlhf_program.h). A model's weights are
/// replicated over dp and sp alike, so as weights an sp layout is one of
/// dp * sp.
inline Layout layoutFrom(const int64_t *l) {
  return {l[0], l[1] * l[5], l[2], l[3]};
}

/// Where a call's ranks and batch rows are. With sp > 1 (and so pp = 1) the
/// pipeline slot holds sp: ranks run dp, sp, tp from the outside in,
/// makeGroups gives the sequence-parallel groups as pipelines, and the sp
/// ranks of a dp group share its rows as pipeline stages would.
inline Layout rowsLayout(const int64_t *l) {
  return {l[0], l[1], l[2], l[5] > 1 ? l[5] : l[3]};
}

ModelState &modelAt(rlhf_prog *p, int64_t i);

/// Row range of data-parallel rank `d` of `dp` over `rows`.
std::pair<int64_t, int64_t> rowSlice(int64_t d, int64_t dp, int64_t rows);

/// `v`'s tensor (and mask) moved to `to`: ranks of `to` end up holding their
/// data-parallel rows (all rows when `to` is the replicated layout).
rlhf_value *relayout(rlhf_prog *p, rlhf_value *v, const Layout &to);

/// A record of `examples` (a batch's rows) of dataset `d`, tokenized into
/// its fields; `where` names them in warnings ("at step 3").
rlhf_value *loadRows(rlhf_prog *p, DatasetState &d,
                     std::vector<Example> examples, const std::string &where);

rlhf_value *tensorValue(rlhf_prog *p, at::Tensor t, at::Tensor mask,
                        int64_t rows, std::optional<Layout> layout);
rlhf_value *recordValue(rlhf_prog *p,
                        std::map<std::string, rlhf_value *> fields);

/// This rank's tensor of `v` when the call runs on `l` (undefined off-mesh).
at::Tensor rowsOn(rlhf_prog *p, rlhf_value *v, const Layout &l,
                  at::Tensor *mask = nullptr);

/// A tensor gathered on every rank (host functions run replicated).
rlhf_value *gathered(rlhf_prog *p, rlhf_value *v);

/// This rank's rows of a train call on `l`: its data-parallel share of
/// every minibatch, so that minibatch m holds the same global rows whatever
/// the layout (a contiguous split of the whole batch would not).
at::Tensor trainRows(rlhf_prog *p, rlhf_value *v, const Layout &l,
                     int64_t minibatches, at::Tensor *mask);

/// The groups of a call placed as `lay`: its rows layout's, and under sp
/// USP's sub-groups and the weights' layout's (dp x sp, for gradients).
/// Every rank calls it (collective the first time).
ParallelGroups &callGroups(rlhf_prog *p, const int64_t *lay);

/// The model of `m` as laid out for a call placed as `lay` (a layout
/// array; an error when the plan left it elsewhere or in host memory). This
/// rank must be in the layout.
LlamaModel makeModel(rlhf_prog *p, ModelState &m, const int64_t *lay);

/// Where a timed op is drawn in the measured trace: on the ranks of
/// `layouts` (every rank when empty), as category `cat`. Ranks outside them
/// pass through the op without work of their own.
struct TraceOn {
  const char *cat;
  std::vector<Layout> layouts;
  int64_t step = -1; ///< the iteration it serves (-1: the current one)
};

/// Times a call and records it under `label` (max over ranks), and with
/// --trace as a span of this rank.
template <typename F>
auto timed(rlhf_prog *p, const std::string &label, const TraceOn &on, F &&f) {
  auto t0 = Clock::now();
  SpanPeaks::Span span(p->peaks ? &*p->peaks : nullptr);
  auto r = f();
  // Collectives on a GPU do not wait on the host: the span ends when its
  // work does, and a collective that failed meanwhile fails this span.
  if (p->device.is_cuda()) {
    c10::impl::getDeviceGuardImpl(p->device.type())
        ->synchronizeDevice(p->device.index());
    CommWatchdog::process().check();
  }
  const double peak = span.close();
  auto t1 = Clock::now();
  p->record("time/" + label, std::chrono::duration<double>(t1 - t0).count(),
            true, true);
  if (p->trace &&
      (on.layouts.empty() ||
       std::any_of(on.layouts.begin(), on.layouts.end(),
                   [&](const Layout &l) { return l.contains(p->rank); })))
    p->trace->add(label, on.cat, t0, t1, on.step < 0 ? p->stepIndex : on.step,
                  peak);
  return r;
}

/// The iteration a generate's samples are seeded by: the step, told apart
/// from dynamic sampling's further rounds (steps stay below 2^40).
inline int64_t samplingStep(const rlhf_prog *p) {
  if (p->eval.seedStep)
    return *p->eval.seedStep;
  return p->stepIndex + (int64_t(p->filter.rounds.size()) << 40);
}

/// The end-of-run line of dynamic sampling (ProgramFilter.cpp), or "".
std::string filterReport(const rlhf_prog *p);

/// Samples `spec.n` continuations of every prompt of `prompts` (replicated)
/// with `model` on the ranks of `l`, seeded by iteration `step` and row so
/// that the samples depend on neither the layout nor when they are made.
/// Ranks off `l` return only the row count.
GeneratedBatch generateRows(rlhf_prog *p, LlamaModel *model, const Layout &l,
                            rlhf_value *prompts, const GenerateSpec &spec,
                            int64_t step);

/// The record a generate call returns: {prompt, seq, logprobs, mask} of
/// `b`, split by rows over `l`.
rlhf_value *generatedValue(rlhf_prog *p, const GeneratedBatch &b,
                           const Layout &l);

/// OUT/checkpoints/step-N for the checkpoint after step index `step`: N
/// counts the steps done (step-20 after 20 steps), as the progress lines,
/// metrics.jsonl and `latest` do.
std::filesystem::path checkpointDir(const rlhf_prog *p, int64_t step);

/// Checkpoints every model that changed after step index `step` to
/// checkpointDir (collective), then moves OUT/checkpoints/latest to it and,
/// under --keep-checkpoints, removes the checkpoints older than the kept.
void saveAll(rlhf_prog *p, int64_t step);

/// The step index of the last complete checkpoint under OUT, or -1.
int64_t latestCheckpoint(const rlhf_prog *p);

/// Takes SIGUSR1 as a request to checkpoint after the step in progress and
/// stop (StopRequest.cpp); call before any thread starts.
void watchStopRequests();
/// Whether this process got SIGUSR1 (ranks agree at a step's end).
bool stopRequested();

/// --export-hf: every trainable model's final weights, gathered whole to
/// rank 0 and written as a Hugging Face checkpoint in DIR/<model>, with the
/// files of the tokenizer the run used (else of its checkpoint directory).
void exportHf(rlhf_prog *p);
/// What identifies the run tokenizer's ids: the vocabulary size and a hash
/// of every token's text, computed once. A checkpoint keeps it, so a resume
/// whose datasets (the character vocabulary) or tokenizer differ is
/// refused.
const nlohmann::json &tokenizerIdentity(rlhf_prog *p);

/// At start, --out and the models: a fresh run's checks, or --resume's
/// checkpoint loaded into the plan's layouts (ProgramResume.cpp). Sets
/// firstStep and resumedFrom.
void openRun(rlhf_prog *p);

/// Evaluates on the held-out dataset when it is due after `done` steps:
/// before the first step, every eval_interval steps and after the last.
void evaluateIfDue(rlhf_prog *p, int64_t done);

/// Tells every rank what rank 0 read from eval.jsonl of a resumed run:
/// whether the checkpoint's step was evaluated. After the start's barrier,
/// so that a rank failing at start is not waited for in a broadcast.
void shareEvalLog(rlhf_prog *p);

/// "evaluation: N passes, B batches in S s (plan predicted ...)", or "" when
/// none ran.
std::string evalReport(const rlhf_prog *p);

/// Writes the samples that asynchronous generators made ahead of `step`
/// into checkpoint folder `dir`, and reads them back on resume.
void saveAhead(rlhf_prog *p, const std::filesystem::path &dir, int64_t step);

/// A copy of `m`'s weights laid out as `to` (collective over every rank;
/// `m` keeps its own).
ParamMap weightsCopy(rlhf_prog *p, const ModelState &m, const Layout &to);

/// Reallocates `m`'s Adam moments (and master weights) to `to` (collective;
/// a no-op when there).
void moveMoments(rlhf_prog *p, ModelState &m, const Layout &to);

/// script_reward: rank 0 decodes every sample, scores it with the pool of
/// the call's command, and broadcasts the scores. `answer` is the input as
/// passed (a dataset column carries its rows' text); `x` the gathered inputs.
rlhf_value *scriptReward(rlhf_prog *p, rlhf_value *answer,
                         const std::vector<rlhf_value *> &x, const Settings &s);

/// A train call of model `mi` on `lay` with the loss `loss` (fn code):
/// epochs of trainStep over this rank's rows of the inputs, the loss and
/// the loss's metrics, and a record {loss, metrics...}. Runs inside the
/// caller's `guarded`.
rlhf_value *trainCall(rlhf_prog *p, int64_t mi, const FnProgram &loss,
                      int64_t nin, rlhf_value *const *ins, const int64_t *lay,
                      int64_t minibatches, int64_t epochs, const char *settings,
                      const char *label);

/// rlhf_eval_loss: the loss `loss` and its metrics, forward only, on the
/// real rows of the eval batch, added to the evaluation's means. Runs
/// inside the caller's `guarded`.
void evalLossCall(rlhf_prog *p, int64_t mi, const FnProgram &loss, int64_t nin,
                  rlhf_value *const *ins, const int64_t *lay,
                  int64_t minibatches, const char *settings, const char *label);

} // namespace rlhf::exec

#endif // RLHF_RUNTIME_LIB_PROGRAMSTATE_H
