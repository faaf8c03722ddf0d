//===- ProgramFilter.cpp - dynamic sampling (DAPO's filter_groups) --------===//
//
// rlhf_filter_round and rlhf_filter_take behind rlhf.filter_groups: each
// round's values are gathered on every rank (the decision is then the same
// everywhere), prompts whose samples all score alike are set aside, and the
// kept groups of all rounds make up the iteration's batch. Like verl's
// filter_groups, surplus kept groups of the last round are dropped (their
// samples stay on-policy); unlike it, a batch still short after max_rounds
// is filled with groups that did not vary instead of failing the run.
//
//===----------------------------------------------------------------------===//

#include "ProgramState.h"

#include <string>

using namespace rlhf;
using namespace rlhf::exec;

namespace {

/// The rows of `v` (gathered) for the (round-local) prompts `prompts` of
/// the `drawn` a round has: per-prompt rows by prompt, per-sample rows by
/// group of `n`.
at::Tensor keptRows(const at::Tensor &t, const std::vector<int64_t> &prompts,
                    int64_t drawn, int64_t n) {
  if (t.size(0) != drawn && t.size(0) != drawn * n)
    throw Error("filter_groups keeps rows per prompt (" +
                std::to_string(drawn) + ") or per sample (" +
                std::to_string(drawn * n) + "), but a value has " +
                std::to_string(t.size(0)));
  std::vector<int64_t> rows;
  const int64_t per = t.size(0) == drawn ? 1 : n;
  for (int64_t i : prompts)
    for (int64_t k = 0; k < per; ++k)
      rows.push_back(i * per + k);
  return t.index_select(0, at::tensor(rows, at::kLong));
}

/// The merged value `i` of the chosen (round, prompt) pairs.
rlhf_value *assemble(rlhf_prog *p, const FilterState &st, size_t i,
                     const std::vector<std::vector<int64_t>> &chosen,
                     int64_t drawn, int64_t n) {
  const rlhf_value *first = st.rounds.front().values[i];
  auto one = [&](auto fieldOf) {
    std::vector<at::Tensor> ts, masks;
    std::shared_ptr<std::vector<Example>> examples;
    for (size_t r = 0; r < st.rounds.size(); ++r) {
      if (chosen[r].empty())
        continue;
      const rlhf_value *v = fieldOf(st.rounds[r].values[i]);
      ts.push_back(keptRows(v->t, chosen[r], drawn, n));
      if (v->mask.defined())
        masks.push_back(keptRows(v->mask, chosen[r], drawn, n));
      if (v->examples) {
        if (!examples)
          examples = std::make_shared<std::vector<Example>>();
        for (int64_t k : chosen[r])
          examples->push_back((*v->examples)[size_t(k)]);
      }
    }
    at::Tensor t = at::cat(ts);
    rlhf_value *out = tensorValue(
        p, t, masks.size() == ts.size() ? at::cat(masks) : at::Tensor(),
        t.size(0), std::nullopt);
    out->examples = std::move(examples);
    return out;
  };
  if (!first->isRecord)
    return one([](const rlhf_value *v) { return v; });
  std::map<std::string, rlhf_value *> fields;
  for (const auto &[name, _] : first->fields)
    fields[name] = one(
        [&, name = name](const rlhf_value *v) { return v->fields.at(name); });
  return recordValue(p, std::move(fields));
}

/// Folds the metric slots this round recorded into the same keys of the
/// earlier rounds: times add up, other values average over the rounds.
void mergeRoundMetrics(rlhf_prog *p, size_t from, int64_t round) {
  size_t keep = from;
  for (size_t i = from; i < p->metricCursor; ++i) {
    Metric &m = p->metrics[i];
    Metric *into = nullptr;
    for (size_t j = from; j-- > 0;)
      if (p->metrics[j].key == m.key) {
        into = &p->metrics[j];
        break;
      }
    if (!into) {
      p->metrics[keep++] = m;
      continue;
    }
    if (m.isTime)
      into->value += m.value;
    else if (m.valid && into->valid)
      into->value = (into->value * double(round) + m.value) / double(round + 1);
    else if (m.valid)
      *into = m;
  }
  p->metricCursor = keep;
}

} // namespace

int64_t rlhf_filter_round(rlhf_prog *p, rlhf_value *metric, int64_t nvalues,
                          rlhf_value *const *values, int64_t group,
                          int64_t maxRounds, double minStd, double expected,
                          int64_t di) {
  return guarded(p, "filter_groups", [&]() -> int64_t {
    FilterState &st = p->filter;
    if (di < 0 || di >= int64_t(p->datasets.size()))
      throw Error("dataset index out of range");
    DatasetState &d = p->datasets[size_t(di)];
    const int64_t batch = d.batch, round = int64_t(st.rounds.size());
    if (round > 0)
      mergeRoundMetrics(p, st.roundMetrics, round);
    at::Tensor score = gathered(p, metric)->t.to(at::kDouble);
    // A round draws gen_batch prompts, which need not be a batch.
    if (group < 2 || score.dim() != 1 || score.size(0) % group != 0)
      throw Error("filter_groups: " + std::to_string(score.numel()) +
                  " scores are not groups of " + std::to_string(group) +
                  " samples");
    const int64_t drawn = score.size(0) / group;
    if (maxRounds * drawn < batch)
      throw Error("filter_groups: " + std::to_string(maxRounds) +
                  " rounds of " + std::to_string(drawn) +
                  " prompts cannot fill a batch of " + std::to_string(batch));
    score = score.reshape({drawn, group});
    // At min_std 0 any difference counts: a std of equal floats may round
    // above zero.
    at::Tensor varies =
        minStd > 0 ? score.std(1, /*unbiased=*/false) > minStd
                   : std::get<0>(score.max(1)) > std::get<0>(score.min(1));
    FilterState::Round r;
    auto gather = [&](rlhf_value *v) {
      rlhf_value *g = gathered(p, v);
      if (!g->examples)
        g->examples = v->examples; // the text script_reward sends
      return g;
    };
    for (int64_t i = 0; i < nvalues; ++i) {
      if (!values[i]->isRecord) {
        r.values.push_back(gather(values[i]));
        continue;
      }
      std::map<std::string, rlhf_value *> fields;
      for (auto &[name, f] : values[i]->fields)
        fields[name] = gather(f);
      r.values.push_back(recordValue(p, std::move(fields)));
    }
    auto vary = varies.accessor<bool, 1>();
    for (int64_t i = 0; i < drawn; ++i)
      (vary[i] ? r.varied : r.flat).push_back(i);
    st.rounds.push_back(std::move(r));
    int64_t have = 0;
    for (const FilterState::Round &x : st.rounds)
      have += int64_t(x.varied.size());
    // The next round (or step) reads on after this round's rows; the step
    // itself accounts for one batch.
    d.skipped += drawn;
    if (have < batch && round + 1 < maxRounds) {
      st.roundMetrics = p->metricCursor;
      return 0;
    }
    d.skipped -= batch;
    // The kept groups in the order they were drawn, then (when short) the
    // others, likewise.
    std::vector<std::vector<int64_t>> chosen(st.rounds.size());
    int64_t left = batch, filled = 0;
    for (auto pick : {&FilterState::Round::varied, &FilterState::Round::flat})
      for (size_t k = 0; k < st.rounds.size(); ++k)
        for (int64_t i : st.rounds[k].*pick)
          if (left > 0) {
            chosen[k].push_back(i);
            --left;
            filled += pick == &FilterState::Round::flat;
          }
    st.kept.clear();
    for (size_t i = 0; i < size_t(nvalues); ++i)
      st.kept.push_back(assemble(p, st, i, chosen, drawn, group));
    const int64_t rounds = int64_t(st.rounds.size());
    p->record("filter/rounds", double(rounds), true);
    p->record("filter/varied", double(have) / double(rounds * drawn), true);
    p->record("filter/filled", double(filled), true);
    st.expected = expected;
    st.drawn = drawn;
    ++st.iterations;
    st.roundsDone += rounds;
    if (filled > 0) {
      ++st.filledIterations;
      st.filledGroups += filled;
      if (p->rank == 0 && !st.warnedFill) {
        st.warnedFill = true;
        std::fprintf(stderr,
                     "%s: warning: step %lld: %lld groups varied in %lld "
                     "rounds of %lld prompts (max_rounds), short of a batch "
                     "of %lld; %lld groups that did not vary fill it (they "
                     "train nothing under group-relative advantages); raise "
                     "max_rounds or gen_batch, or lower min_std, if this "
                     "persists\n",
                     p->name.c_str(), (long long)p->stepIndex + 1,
                     (long long)have, (long long)rounds, (long long)drawn,
                     (long long)batch, (long long)filled);
      }
    }
    st.rounds.clear();
    return 1;
  });
}

rlhf_value *rlhf_filter_take(rlhf_prog *p, int64_t i) {
  return guarded(p, "filter_groups", [&] {
    if (i < 0 || i >= int64_t(p->filter.kept.size()))
      throw Error("filter_groups has no kept value " + std::to_string(i));
    return p->filter.kept[size_t(i)];
  });
}

namespace rlhf::exec {

std::string filterReport(const rlhf_prog *p) {
  const FilterState &st = p->filter;
  if (st.iterations == 0)
    return "";
  char buf[512];
  double mean = double(st.roundsDone) / double(st.iterations);
  int n = std::snprintf(
      buf, sizeof buf,
      "dynamic sampling: %.2f rounds of %lld prompts per iteration over "
      "%lld iterations (the plan priced %.2f",
      mean, (long long)st.drawn, (long long)st.iterations, st.expected);
  std::string s(buf, size_t(n));
  if (mean > st.expected * 1.1 || mean < st.expected / 1.1) {
    std::snprintf(buf, sizeof buf,
                  "; expected_rounds = %.2f in @filter_groups plans for this",
                  mean);
    s += buf;
  }
  s += ")";
  if (st.filledIterations > 0) {
    std::snprintf(buf, sizeof buf,
                  "; %lld iteration%s filled %lld groups that did not vary",
                  (long long)st.filledIterations,
                  st.filledIterations == 1 ? "" : "s",
                  (long long)st.filledGroups);
    s += buf;
  }
  return s;
}

} // namespace rlhf::exec
