//===- ProgramValues.cpp - where batch values live, and how they move
//------===//
//
// A batch value is replicated on every rank or split by rows over the
// data-parallel groups of the layout that produced it; a call that needs it
// in another layout moves its rows with transferBatch, and host functions
// first gather their inputs everywhere. Also the model state helpers the
// calls share, and rlhf_load, which makes a dataset's batch into values.
//
//===----------------------------------------------------------------------===//

#include "ProgramState.h"

#include <cstdlib>
#include <string>

using namespace rlhf;
using namespace rlhf::exec;

namespace rlhf::exec {

ModelState &modelAt(rlhf_prog *p, int64_t i) {
  if (i < 0 || i >= int64_t(p->models.size()))
    throw Error("model index " + std::to_string(i) + " out of range");
  return p->models[size_t(i)];
}

std::pair<int64_t, int64_t> rowSlice(int64_t d, int64_t dp, int64_t rows) {
  return {d * rows / dp, (d + 1) * rows / dp};
}

rlhf_value *relayout(rlhf_prog *p, rlhf_value *v, const Layout &to) {
  if (v->isRecord)
    throw Error("cannot move a whole record; take a field first");
  if (v->layout && sameLayout(*v->layout, to))
    return v;
  rlhf_value *out = p->newValue();
  out->rows = v->rows;
  out->layout = to;
  ParallelGroups &g = p->groupsOf(to);
  if (!v->layout) {
    // Replicated: every rank cuts its own rows.
    if (g.member) {
      auto [a, b] = rowSlice(g.dpRank, to.dp, v->rows);
      out->t = v->t.narrow(0, a, b - a);
      if (v->mask.defined())
        out->mask = v->mask.narrow(0, a, b - a);
    }
    return out;
  }
  // Every rank learns the row shape from the producer's first head (all
  // ranks must agree on it to size the receive buffers).
  const Layout &from = *v->layout;
  auto move = [&](const at::Tensor &mine, bool hasIt) -> at::Tensor {
    // Shape of one row, broadcast from the producer's first data-parallel head.
    int64_t head = from.gpu(0, from.pp - 1, 0);
    at::Tensor meta = at::zeros({9}, at::kLong);
    if (p->rank == head) {
      meta[0] = hasIt ? 1 : 0;
      meta[1] = mine.dim();
      for (int64_t i = 1; i < mine.dim() && i < 8; ++i)
        meta[1 + i] = mine.size(i);
      meta[8] = int64_t(mine.scalar_type());
    }
    p->world->broadcast(meta, int(head));
    if (meta[0].item<int64_t>() == 0)
      return at::Tensor();
    std::vector<int64_t> shape{1};
    for (int64_t i = 1; i < meta[1].item<int64_t>(); ++i)
      shape.push_back(meta[1 + i].item<int64_t>());
    at::Tensor like = at::empty(shape, at::ScalarType(meta[8].item<int64_t>()));
    at::Tensor t = transferBatch(mine.defined() ? mine : like, v->rows, like,
                                 from, to, *p->world);
    // transferBatch fills stage 0 of each pipeline; later stages copy it.
    if (to.pp > 1 && g.member) {
      if (!t.defined()) {
        auto [a, b] = rowSlice(g.dpRank, to.dp, v->rows);
        shape[0] = b - a;
        t = at::empty(shape, like.options());
      }
      g.pp->broadcast(t, 0);
    }
    return t;
  };
  out->t = move(v->t, true);
  out->mask = move(v->mask, v->mask.defined());
  return out;
}

rlhf_value *tensorValue(rlhf_prog *p, at::Tensor t, at::Tensor mask,
                        int64_t rows, std::optional<Layout> layout) {
  rlhf_value *v = p->newValue();
  v->t = std::move(t);
  v->mask = std::move(mask);
  v->rows = rows;
  v->layout = layout;
  return v;
}

rlhf_value *recordValue(rlhf_prog *p,
                        std::map<std::string, rlhf_value *> fields) {
  rlhf_value *v = p->newValue();
  v->isRecord = true;
  v->fields = std::move(fields);
  return v;
}

at::Tensor rowsOn(rlhf_prog *p, rlhf_value *v, const Layout &l,
                  at::Tensor *mask) {
  rlhf_value *m = relayout(p, v, l);
  if (mask)
    *mask = m->mask;
  return m->t;
}

rlhf_value *gathered(rlhf_prog *p, rlhf_value *v) {
  return relayout(p, v, p->replicated);
}

at::Tensor trainRows(rlhf_prog *p, rlhf_value *v, const Layout &l,
                     int64_t minibatches, at::Tensor *mask) {
  rlhf_value *full = gathered(p, v);
  ParallelGroups &g = p->groupsOf(l);
  if (!g.member)
    return at::Tensor();
  const int64_t N = full->rows;
  if (minibatches < 1 || N % minibatches)
    throw Error("batch of " + std::to_string(N) + " rows does not split into " +
                std::to_string(minibatches) + " minibatches");
  const int64_t per = N / minibatches;
  std::vector<int64_t> rows;
  for (int64_t m = 0; m < minibatches; ++m) {
    auto [a, b] = rowSlice(g.dpRank, l.dp, per);
    for (int64_t r = a; r < b; ++r)
      rows.push_back(m * per + r);
  }
  at::Tensor idx = at::tensor(rows, at::kLong);
  if (mask)
    *mask =
        full->mask.defined() ? full->mask.index_select(0, idx) : at::Tensor();
  return full->t.index_select(0, idx);
}

ParallelGroups &callGroups(rlhf_prog *p, const int64_t *lay) {
  const Layout l = rowsLayout(lay);
  ParallelGroups &g = p->groupsOf(l);
  if (lay[5] > 1) {
    p->groupsOf(layoutFrom(lay)); // dp x sp: the weights' replicas
    auto key = std::make_tuple(l.firstGpu, l.dp, l.tp, l.pp, lay[6]);
    if (!p->seqGroups.count(key))
      p->seqGroups.emplace(key, makeSeqGroups(*p->world, l, int(lay[6])));
  }
  return g;
}

LlamaModel makeModel(rlhf_prog *p, ModelState &m, const int64_t *lay) {
  const Layout w = layoutFrom(lay), l = rowsLayout(lay);
  const int64_t sp = lay[5], ring = lay[6];
  if (m.offloaded)
    throw Error("model '" + m.name +
                "' rests in host memory; the plan is missing an rlhf.onload "
                "before this call");
  if (!sameLayout(m.layout, w))
    throw Error("model '" + m.name + "' is laid out as " + layoutStr(m.layout) +
                " but the call runs as " + layoutStr(w) +
                "; the plan is missing a reallocation");
  ParallelGroups &g = p->groupsOf(l);
  TensorParallel tp{g.tp.get(), g.tpRank, int(l.tp)};
  // On by default: the plans price activations as Megatron's sequence
  // parallelism holds them. Off only to measure what it saves.
  static const bool shard = [] {
    const char *e = std::getenv("RLHF_TP_SHARD_SEQUENCE");
    return !e || std::string(e) != "0";
  }();
  tp.shardSequence = shard;
  if (sp <= 1)
    return LlamaModel(m.cfg, m.params, tp, {g.pp.get(), g.stage, int(l.pp)});
  // The rows layout's pipelines are the sp groups (rowsLayout).
  if (ring < 1 || sp % ring)
    throw Error("the plan splits sp = " + std::to_string(sp) +
                " into rings of " + std::to_string(ring) +
                ", which do not divide it");
  auto it =
      p->seqGroups.find(std::make_tuple(l.firstGpu, l.dp, l.tp, l.pp, ring));
  if (it == p->seqGroups.end())
    throw Error("the sequence-parallel groups of " + layoutStr(l) +
                " were not made on every rank (callGroups)");
  return LlamaModel(m.cfg, m.params, tp, {},
                    {g.pp.get(), g.stage, int(sp), it->second.first.get(),
                     it->second.second.get(), int(ring)});
}

ParamMap weightsCopy(rlhf_prog *p, const ModelState &m, const Layout &to) {
  ParamMap src;
  for (auto &[n, x] : m.params)
    src[n] = x.detach().clone();
  return reallocate(m.cfg, std::move(src), m.layout, to, *p->world, nullptr,
                    p->weightOpts());
}

void moveMoments(rlhf_prog *p, ModelState &m, const Layout &to) {
  if (!m.opt || sameLayout(m.optLayout, to) || m.trainCalls == 0) {
    m.optLayout = to;
    return;
  }
  m.opt->unshard();
  std::vector<ParamMap *> states{&m.opt->moments1(), &m.opt->moments2()};
  // Every rank knows the precision, so all take part in the same calls.
  if (p->weightDtype != at::kFloat)
    states.push_back(&m.opt->masterWeights());
  for (ParamMap *s : states)
    *s = reallocate(m.cfg, std::move(*s), m.optLayout, to, *p->world, nullptr,
                    p->fp32Opts());
  m.optLayout = to;
}

} // namespace rlhf::exec

namespace {

/// Rows of one field of a batch that did not fit its width, reported once
/// per field: a silent cut would train on sequences without their ends.
struct Cuts {
  int64_t rows = 0, longest = 0;
  void add(size_t n, int64_t width) {
    if (int64_t(n) > width) {
      ++rows;
      longest = std::max(longest, int64_t(n));
    }
  }
};

void reportCuts(rlhf_prog *p, DatasetState &d, const std::string &f,
                const Cuts &c, int64_t width, bool completion,
                const std::string &where) {
  if (!c.rows || p->rank != 0 || !d.warnedCut.insert(f).second)
    return;
  std::string what, kept, fix;
  if (f == "prompt") {
    what = "prompts";
    kept = "keep their last " + std::to_string(width) + " tokens";
    fix = "max_prompt_len to " + std::to_string(c.longest);
  } else {
    what = "'" + f + "' " + (completion ? "completions" : "sequences");
    kept = "keep their first tokens, so their ends (and eos) are not "
           "trained on";
    fix = "max_response_len by " + std::to_string(c.longest - width);
  }
  std::fprintf(stderr,
               "warning: dataset '%s' ('%s'): %lld of the %lld %s %s "
               "are longer than the %lld tokens the dataset holds (the "
               "longest: %lld) and %s; raise %s to keep them whole (said "
               "once per field)\n",
               d.name.c_str(), d.path.c_str(), (long long)c.rows,
               (long long)d.batch, what.c_str(), where.c_str(),
               (long long)width, (long long)c.longest, kept.c_str(),
               fix.c_str());
}

} // namespace

// A dataset's sequence fields (chosen, rejected, text) are whole sequences,
// trained on at every real token, unless the dataset also has `prompt`:
// then a row's column is the completion of its prompt (TRL's
// prompt-completion rows), the sequence is the prompt followed by it, and
// its mask covers the completion only. `completion` is such a column in
// unpaired rows (KTO's prompt, completion, label), and `kl_completion` is
// each row's prompt followed by the next row's completion (the last row's
// by the first's), the mismatched pairs KTO estimates its KL from, as TRL
// builds them per batch.
rlhf_value *rlhf::exec::loadRows(rlhf_prog *p, DatasetState &d,
                                 std::vector<Example> examples,
                                 const std::string &where) {
  auto rows = std::make_shared<const std::vector<Example>>(std::move(examples));
  const int64_t B = int64_t(rows->size()), pad = p->tokenizer->pad();
  const TextTokenizer &tok = *p->tokenizer;
  const bool hasPrompt =
      std::find(d.fields.begin(), d.fields.end(), "prompt") != d.fields.end();
  // Each row's prompt, its last max_prompt_len tokens.
  std::vector<std::vector<int64_t>> prompts;
  Cuts promptCuts;
  if (hasPrompt)
    for (const Example &row : *rows) {
      std::vector<int64_t> ids = tok.encode(row.at("prompt"), true);
      promptCuts.add(ids.size(), d.promptLen);
      if (int64_t(ids.size()) > d.promptLen)
        ids.erase(ids.begin(), ids.end() - d.promptLen);
      prompts.push_back(std::move(ids));
    }
  std::map<std::string, rlhf_value *> fields;
  for (const std::string &f : d.fields) {
    if (f == "label") { // checked when read: a number, or 0/1 for a bool
      std::vector<float> label;
      for (const Example &row : *rows)
        label.push_back(float(std::strtod(row.at(f).c_str(), nullptr)));
      fields[f] = tensorValue(p, at::tensor(label, at::kFloat), at::Tensor(), B,
                              std::nullopt);
      continue;
    }
    const bool mismatched = f == "kl_completion";
    const std::string column = mismatched ? "completion" : f;
    const bool answer = f == "answer", prompt = f == "prompt";
    const bool completion = hasPrompt && !prompt && !answer;
    const int64_t width = prompt   ? d.promptLen
                          : answer ? std::max<int64_t>(d.responseLen, 1)
                                   : d.promptLen + d.responseLen;
    at::Tensor t = at::full({B, width}, pad, at::kLong);
    // Where each row's completion starts (prompt-completion rows).
    at::Tensor start = at::zeros({B, 1}, at::kLong);
    Cuts cuts;
    for (int64_t b = 0; b < B; ++b) {
      const Example &row = (*rows)[size_t(b)];
      std::vector<int64_t> ids;
      if (prompt) {
        ids = prompts[size_t(b)];
      } else if (completion) {
        ids = prompts[size_t(b)];
        start[b][0] = int64_t(ids.size());
        const Example &from = mismatched ? (*rows)[size_t((b + 1) % B)] : row;
        std::vector<int64_t> c = tok.encode(from.at(column), false);
        c.push_back(tok.eos());
        ids.insert(ids.end(), c.begin(), c.end());
      } else {
        ids = tok.encode(row.at(f), !answer);
        if (!answer)
          ids.push_back(tok.eos());
      }
      // Answers are checked at start: none is wider than its field.
      if (!prompt)
        cuts.add(ids.size(), width);
      if (int64_t(ids.size()) > width)
        ids.resize(size_t(width));
      // Prompts are left-padded, so that generation continues them.
      const int64_t off = prompt ? width - int64_t(ids.size()) : 0;
      t[b].narrow(0, off, int64_t(ids.size()))
          .copy_(at::tensor(ids, at::kLong));
    }
    // A mismatched pair cut short only shortens a KL estimate.
    if (!mismatched)
      reportCuts(p, d, f, prompt ? promptCuts : cuts, width, completion, where);
    at::Tensor mask;
    if (!prompt && !answer) {
      // Whole sequences: every real token is predicted and trained on;
      // completions: the tokens after the prompt.
      mask = predictedTokens(t, pad);
      if (completion)
        mask = mask & (at::arange(1, width, at::kLong).unsqueeze(0) >= start);
    }
    fields[f] = tensorValue(p, t, mask, B, std::nullopt);
    fields[f]->examples = rows; // script_reward sends the text
  }
  return recordValue(p, std::move(fields));
}

extern "C" {

rlhf_value *rlhf_load(rlhf_prog *p, int64_t di, int64_t step, int64_t n) {
  return guarded(p, "load", [&] {
    if (di < 0 || di >= int64_t(p->datasets.size()))
      throw Error("dataset index out of range");
    DatasetState &d = p->datasets[size_t(di)];
    if (n <= 0)
      throw Error("load of " + std::to_string(n) + " rows");
    return loadRows(
        p, d, d.data->rows(step * d.batch + d.skipped, n, uint64_t(p->seed)),
        "at step " + std::to_string(step + 1));
  });
}

} // extern "C"
