//===- ProgramEval.cpp - held-out evaluation ------------------------------===//
//
// A program compiled with `eval = DATASET` registers an eval function that
// runs the iteration's scoring ops (generate one greedy sample per prompt,
// or eval_samples sampled ones, then the rewards; or a train call's loss,
// forward only) on one batch of the held-out dataset. Before the first step,
// every eval_interval steps and after the last, the runtime runs it over every
// row of the dataset in file order and writes each reward's mean to
// OUT/eval.jsonl, as verl's validation does. A last short batch is filled with
// rows from the start, so that every call sees the rows the plan priced, and
// only the real rows count. Rows with a data_source (verl's column) are also
// reported per source.
//
//===----------------------------------------------------------------------===//

#include "ProgramSteps.h"

#include "rlhf/runtime/Files.h"
#include "rlhf/runtime/HostCompute.h"

using namespace rlhf;
using namespace rlhf::exec;
namespace fs = std::filesystem;

namespace {

bool due(const rlhf_prog *p, int64_t done) {
  const EvalState &ev = p->eval;
  if (!ev.body || ev.logged.count(done))
    return false;
  return done == 0 || done == p->steps ||
         (ev.interval > 0 && done % ev.interval == 0);
}

/// The evaluation's next mean, `label`'s: in the order the eval function
/// reports them, the same every batch.
EvalState::Score &nextScore(EvalState &ev, const std::string &label) {
  if (ev.cursor == ev.scores.size())
    ev.scores.push_back({label});
  return ev.scores[ev.cursor++];
}

} // namespace

void rlhf::exec::evaluateIfDue(rlhf_prog *p, int64_t done) {
  if (!due(p, done))
    return;
  EvalState &ev = p->eval;
  DatasetState &d = p->datasets[size_t(ev.dataset)];
  const int64_t rows = int64_t(d.data->size());
  const int64_t batches = (rows + d.batch - 1) / d.batch;
  if (p->rank == 0 && !p->quiet) {
    std::printf("evaluating on the %lld prompts of '%s' (%lld batch%s)...\n",
                (long long)rows, d.name.c_str(), (long long)batches,
                batches == 1 ? "" : "es");
    std::fflush(stdout);
  }
  auto start = Clock::now();
  ev.scores.clear();
  for (int64_t b = 0; b < batches; ++b) {
    ev.realRows = std::min(d.batch, rows - b * d.batch);
    ev.cursor = 0;
    // Samples drawn apart from every training step's (those seed by steps
    // >= 0), and the same for this evaluation in a resumed run.
    ev.seedStep = -1 - (done * batches + b);
    p->samples.seq = p->samples.score = nullptr;
    ev.body(p, b);
    ev.seedStep.reset();
    // Each prompt's samples are consecutive rows; the wrapped prompts'
    // count for nothing.
    writeSamples(p, "eval-" + std::to_string(done) + ".jsonl", done,
                 b * d.batch * ev.samples, ev.realRows * ev.samples);
    // The calls' own metrics (times, training's reward) belong to no step.
    p->metricCursor = 0;
    p->values.clear();
  }
  ev.logged.insert(done);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ++ev.passes;
  ev.batches += batches;
  ev.seconds += seconds;
  if (p->rank != 0)
    return;
  nlohmann::ordered_json row;
  row["step"] = done;
  std::string line = "eval after step " + std::to_string(done) + ":";
  auto put = [&](const std::string &key, double v) {
    row[key] = v;
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.4g", v);
    line += " " + key + buf;
  };
  // val/PREFIXLABEL, numbered as the step's metrics are when a label
  // repeats, then its best@k (pass@k where the score is 1 for a right
  // answer and 0 otherwise).
  auto report = [&](const std::string &prefix, const EvalState::Score &s,
                    const EvalState::Tally &t) {
    std::string key = "val/" + prefix + s.label;
    for (int k = 2; row.contains(key); ++k)
      key = "val/" + prefix + s.label + "#" + std::to_string(k);
    put(key, t.rows ? t.sum / double(t.rows) : 0.0);
    const std::string k = std::to_string(ev.samples);
    if (ev.samples > 1 && !s.loss)
      put(key + "/best@" + k, t.prompts ? t.best / double(t.prompts) : 0.0);
    if (ev.samples > 1 && s.voted)
      put(key + "/maj@" + k, t.prompts ? t.majority / double(t.prompts) : 0.0);
  };
  for (const EvalState::Score &s : ev.scores)
    report("", s, s.all);
  // Then each data_source apart (verl's val-core/SOURCE/...).
  for (const EvalState::Score &s : ev.scores)
    for (const auto &[source, t] : s.bySource)
      report(source + "/", s, t);
  row["time/eval"] = seconds;
  writeTextFile((fs::path(p->outDir) / "eval.jsonl").string(),
                row.dump() + "\n", std::ios::app);
  if (!p->quiet) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " | %.2f s (plan %.3g s)", seconds,
                  ev.predictedBatch * double(batches));
    std::printf("%s%s\n", line.c_str(), buf);
    std::fflush(stdout);
  }
}

void rlhf::exec::shareEvalLog(rlhf_prog *p) {
  if (!p->eval.body)
    return;
  // Whether the evaluation after the checkpoint's step was written before
  // the run stopped: every rank must agree to run it again or not.
  at::Tensor logged =
      at::tensor({double(p->eval.logged.count(p->firstStep))}, at::kDouble);
  p->world->broadcast(logged, 0);
  if (logged.item<double>() > 0)
    p->eval.logged.insert(p->firstStep);
}

std::string rlhf::exec::evalReport(const rlhf_prog *p) {
  const EvalState &ev = p->eval;
  if (!ev.passes)
    return "";
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "evaluation: %lld pass%s, %lld batches in %.1f s (plan "
                "predicted %.3g s/batch, measured %.3g)",
                (long long)ev.passes, ev.passes == 1 ? "" : "es",
                (long long)ev.batches, ev.seconds, ev.predictedBatch,
                ev.seconds / double(ev.batches));
  return buf;
}

extern "C" {

void rlhf_prog_set_eval(rlhf_prog *p, int64_t dataset, int64_t interval,
                        int64_t samples, double batch_seconds,
                        void (*body)(rlhf_prog *, int64_t)) {
  guarded(p, "eval", [&] {
    if (dataset < 0 || dataset >= int64_t(p->datasets.size()))
      throw Error("eval dataset index out of range");
    p->eval.dataset = dataset;
    p->eval.interval = interval;
    if (samples < 1)
      throw Error("eval samples " + std::to_string(samples));
    p->eval.samples = samples;
    p->eval.predictedBatch = batch_seconds;
    p->eval.body = body;
    return 0;
  });
}

rlhf_value *rlhf_eval_load(rlhf_prog *p, int64_t di, int64_t batch) {
  return guarded(p, "eval load", [&] {
    if (di < 0 || di >= int64_t(p->datasets.size()))
      throw Error("dataset index out of range");
    DatasetState &d = p->datasets[size_t(di)];
    const int64_t n = int64_t(d.data->size());
    if (n == 0)
      throw Error("eval dataset '" + d.name + "' ('" + d.path +
                  "') has no rows");
    std::vector<Example> rows;
    p->eval.rowSources.clear();
    for (int64_t i = 0; i < d.batch; ++i) {
      const size_t row = size_t((batch * d.batch + i) % n);
      rows.push_back((*d.data)[row]);
      p->eval.rowSources.push_back(d.data->source(row));
    }
    return loadRows(p, d, std::move(rows), "in evaluation");
  });
}

void rlhf_eval_score(rlhf_prog *p, rlhf_value *score, const char *label) {
  guarded(p, std::string("eval ") + label, [&] {
    at::Tensor t = gathered(p, score)->t;
    EvalState &ev = p->eval;
    EvalState::Score &s = nextScore(ev, label);
    // Rows are prompt-major: a prompt's samples side by side.
    const int64_t k = ev.samples;
    if (t.size(0) % k)
      throw Error("its " + std::to_string(t.size(0)) + " scores are not " +
                  std::to_string(k) + " samples of each prompt");
    const int64_t real = std::min<int64_t>(ev.realRows, t.size(0) / k);
    at::Tensor x = t.narrow(0, 0, real * k).to(at::kDouble).reshape({real, -1});
    // Per prompt: the sum of its samples' scores, the best, and with
    // predictions, the majority's.
    const at::Tensor sums = x.sum(1).cpu().contiguous(),
                     best = std::get<0>(x.max(1)).cpu().contiguous();
    at::Tensor voted;
    if (score->predictions && k > 1 &&
        int64_t(score->predictions->size()) >= real * k) {
      std::vector<std::string> mine(score->predictions->begin(),
                                    score->predictions->begin() + real * k);
      voted = majorityVote(x.cpu(), mine);
      s.voted = true;
    }
    auto add = [&](EvalState::Tally &tally, int64_t prompt) {
      tally.sum += sums.data_ptr<double>()[prompt];
      tally.best += best.data_ptr<double>()[prompt];
      if (voted.defined())
        tally.majority += voted.data_ptr<double>()[prompt];
      tally.rows += k;
      tally.prompts += 1;
    };
    for (int64_t j = 0; j < real; ++j) {
      add(s.all, j);
      if (std::string source = ev.sourceOf(j); !source.empty())
        add(s.bySource[source], j);
    }
    return 0;
  });
}

} // extern "C"

void rlhf::exec::evalLossCall(rlhf_prog *p, int64_t mi, const FnProgram &loss,
                              int64_t nin, rlhf_value *const *ins,
                              const int64_t *lay, int64_t minibatches,
                              const char *settings, const char *label) {
  ModelState &m = modelAt(p, mi);
  EvalState &ev = p->eval;
  if (nin < 1)
    throw Error(loss.describe() + " takes no inputs; a validation loss needs "
                                  "the eval batch's rows");
  const int64_t batchRows = gathered(p, ins[0])->rows;
  const int64_t real = std::min(ev.realRows, batchRows);
  // The real rows, then those of each data_source among them: the same
  // sets on every rank (each loaded the whole batch).
  std::map<std::string, int64_t> perSource;
  for (int64_t r = 0; r < real; ++r)
    if (std::string source = ev.sourceOf(r); !source.empty())
      ++perSource[source];
  const Layout l = rowsLayout(lay);
  Settings s(settings);
  TrainOptions o;
  o.loss = &loss;
  o.coefs = coefsAt(p, loss);
  o.pad = p->tokenizer->pad();
  // The train call's micro-batches of rows, all of the batch's at once.
  o.microBatches =
      std::max<int64_t>(1, lay[4]) * std::max<int64_t>(1, minibatches);
  const size_t outputs = loss.outputNames().size(), sets = 1 + perSource.size();
  std::vector<double> values(outputs * sets, 0.0);
  timed(p, label, {"call", {l}}, [&] {
    TrainBatch b;
    b.inputs.resize(size_t(nin));
    b.masks.resize(size_t(nin));
    for (int64_t i = 0; i < nin; ++i)
      b.inputs[size_t(i)] = trainRows(p, ins[i], l, 1, &b.masks[size_t(i)]);
    ParallelGroups &g = callGroups(p, lay);
    if (g.member) {
      // This rank's rows, from `lo` of the batch; those past the real rows
      // fill a short last batch and weigh nothing.
      const int64_t rows = b.inputs[0].size(0);
      const int64_t lo = rowSlice(g.dpRank, l.dp, batchRows).first;
      auto all = std::vector<float>(size_t(rows));
      for (int64_t r = 0; r < rows; ++r)
        all[size_t(r)] = lo + r < real ? 1.0f : 0.0f;
      std::vector<at::Tensor> weights = {at::tensor(all)};
      for (const auto &[source, n] : perSource) {
        auto w = std::vector<float>(size_t(rows));
        for (int64_t r = 0; r < rows; ++r)
          w[size_t(r)] = ev.sourceOf(lo + r) == source ? all[size_t(r)] : 0.0f;
        weights.push_back(at::tensor(w));
      }
      o.dp = g.dp.get();
      LlamaModel model = makeModel(p, m, lay);
      model.setTemperature(s.get("temperature", 1.0));
      std::vector<TrainStats> st = evalLosses(model, b, o, weights);
      for (size_t k = 0; k < sets; ++k) {
        values[k * outputs] = st[k].loss;
        for (size_t j = 0; j < st[k].metrics.size(); ++j)
          values.at(k * outputs + j + 1) = st[k].metrics[j];
      }
    }
    // Every rank of the call holds the values; rank 0 writes them.
    at::Tensor t = at::tensor(values, at::kDouble);
    p->world->broadcast(t, int(l.firstGpu));
    for (size_t k = 0; k < values.size(); ++k)
      values[k] = t[int64_t(k)].item<double>();
    return 0;
  });
  for (size_t j = 0; j < outputs; ++j) {
    // As training logs them: loss/MODEL, then NAME/MODEL per metric; each
    // batch's value weighs as many as its rows.
    EvalState::Score &sc = nextScore(
        ev, (j ? loss.outputNames()[j] : std::string("loss")) + "/" + m.name);
    sc.loss = true;
    sc.all.sum += values[j] * double(real);
    sc.all.rows += real;
    size_t k = 1;
    for (const auto &[source, n] : perSource) {
      EvalState::Tally &t = sc.bySource[source];
      t.sum += values[k++ * outputs + j] * double(n);
      t.rows += n;
    }
  }
}
