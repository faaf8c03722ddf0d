//===- ProgramAsync.cpp - generation that runs ahead of training ----------===//
//
// Asynchronous RL with staleness k (AReaL's decoupled PPO): a model's
// generator keeps its own copy of the weights in its own layout, and its
// samples for iteration t may come from any trainer version >= t - k.
//
// The program stays one SPMD sequence of calls. At iteration t:
// - rlhf_generate_stale returns the samples of t, made ahead (or now, on
//   the first iteration of a run);
// - the trainer's ranks score and train on them while the generator's ranks,
//   which have nothing else to do in the iteration, reach
//   rlhf_weight_update and sample iterations t+1..t+k with the weights of
//   version t: that is the overlap;
// - the update then copies version t+1 from the trainer's layout into the
//   generator's (a reallocation that keeps its source).
// So the generator never runs more than k versions ahead: the update is the
// bound, and the samples of t+k have staleness k exactly.
//
// Samples are seeded by their iteration and row, so they do not depend on
// when they are made; checkpoints keep the ones made ahead, and a resumed
// run repeats an uninterrupted one bit for bit.
//
//===----------------------------------------------------------------------===//

#include "ProgramSteps.h"

#include "rlhf/runtime/SafeTensors.h"

#include <sstream>

using namespace rlhf;
using namespace rlhf::exec;
namespace fs = std::filesystem;

GeneratedBatch rlhf::exec::generateRows(rlhf_prog *p, LlamaModel *model,
                                        const Layout &l, rlhf_value *prompt,
                                        const GenerateSpec &spec,
                                        int64_t step) {
  // n samples per prompt, adjacent, so row r samples prompt r / n.
  rlhf_value *full = gathered(p, prompt);
  const int64_t B = full->rows, N = B * spec.n, pad = p->tokenizer->pad();
  GeneratedBatch out;
  out.rows = N;
  ParallelGroups &g = p->groupsOf(l);
  if (!g.member)
    return out;
  auto [a, b] = rowSlice(g.dpRank, l.dp, N);
  GenerateOptions o;
  o.maxNewTokens = spec.maxNew;
  o.greedy = spec.greedy;
  o.temperature = spec.temperature;
  o.topP = spec.topP;
  o.eosToken = p->tokenizer->eos();
  o.padToken = pad;
  // Waves of rows, one after another: each holds a KV cache of its own
  // rows only, so a batch whose cache would not fit at once still runs.
  // Per-row seeds keep every row's sample what one wave would draw.
  const int64_t P = full->t.size(1), waves = std::max<int64_t>(1, spec.waves);
  std::vector<Generation> done;
  int64_t longest = 0; // generated tokens, over the waves
  for (int64_t w = 0; w < waves && a < b; ++w) {
    auto [wa, wb] = rowSlice(w, waves, b - a);
    std::vector<std::vector<int64_t>> rows;
    o.rowSeeds.clear();
    for (int64_t r = a + wa; r < a + wb; ++r) {
      at::Tensor pr = full->t[r / spec.n];
      std::vector<int64_t> ids;
      for (int64_t i = 0; i < pr.size(0); ++i)
        if (int64_t id = pr[i].item<int64_t>(); id != pad)
          ids.push_back(id);
      rows.push_back(std::move(ids));
      // Per-row streams: samples do not depend on the layout.
      o.rowSeeds.push_back(
          mix(mix(uint64_t(p->seed), uint64_t(step)), uint64_t(r)));
    }
    if (rows.empty())
      continue;
    Generation gen = model->generate(rows, o);
    gen.seq = gen.seq.cpu();
    gen.logprobs = gen.logprobs.cpu();
    gen.mask = gen.mask.cpu();
    // Pad the prompt part to the dataset's width so every rank agrees.
    if (gen.promptLen < P) {
      const int64_t extra = P - gen.promptLen, n = gen.seq.size(0);
      gen.seq = at::cat({at::full({n, extra}, pad, at::kLong), gen.seq}, 1);
      gen.mask =
          at::cat({at::zeros({n, extra}, gen.mask.options()), gen.mask}, 1);
      gen.promptLen = P;
    }
    longest = std::max(longest, gen.seq.size(1) - P);
    done.push_back(std::move(gen));
  }
  // A wave whose rows all ended early is padded to the longest, as rows
  // that end early within a wave are.
  std::vector<at::Tensor> seqs, logprobs, masks;
  for (Generation &gen : done) {
    const int64_t n = gen.seq.size(0), G = gen.seq.size(1) - P;
    at::Tensor seq = at::full({n, P + longest}, pad, at::kLong);
    seq.narrow(1, 0, P + G).copy_(gen.seq);
    at::Tensor lp = at::zeros({n, P + longest - 1}, at::kFloat);
    lp.narrow(1, P - 1, G).copy_(gen.logprobs.narrow(1, 0, G));
    at::Tensor mask = at::zeros({n, P + longest - 1}, at::kBool);
    mask.narrow(1, P - 1, G).copy_(gen.mask.narrow(1, P, G).to(at::kBool));
    seqs.push_back(seq);
    logprobs.push_back(lp);
    masks.push_back(mask);
  }
  if (done.empty()) { // no rows on this dp rank
    out.seq = at::full({0, P + 1}, pad, at::kLong);
    out.logprobs = at::zeros({0, P}, at::kFloat);
    out.mask = at::zeros({0, P}, at::kBool);
  } else {
    out.seq = at::cat(seqs);
    out.logprobs = at::cat(logprobs);
    out.mask = at::cat(masks);
  }
  out.prompts = full->t.repeat_interleave(spec.n, 0).narrow(0, a, b - a);
  return out;
}

rlhf_value *rlhf::exec::generatedValue(rlhf_prog *p, const GeneratedBatch &b,
                                       const Layout &l) {
  std::map<std::string, rlhf_value *> f;
  f["prompt"] = tensorValue(p, b.prompts, at::Tensor(), b.rows, l);
  f["seq"] = tensorValue(p, b.seq, b.mask, b.rows, l);
  noteGenerated(p, f["seq"]);
  f["logprobs"] = tensorValue(p, b.logprobs, b.mask, b.rows, l);
  f["mask"] = tensorValue(p, b.mask, b.mask, b.rows, l);
  return recordValue(p, std::move(f));
}

namespace {

/// Where a model's samples made ahead are kept in a checkpoint folder.
fs::path aheadFile(const fs::path &dir, const ModelState &m, int rank) {
  return dir / (m.name + ".ahead") /
         ("rank-" + std::to_string(rank) + ".safetensors");
}

/// Samples iteration `step` with the generator's copy of `m`.
GeneratedBatch sampleAhead(rlhf_prog *p, int64_t mi, int64_t step) {
  ModelState &m = modelAt(p, mi);
  AsyncGenerator &gen = m.gen;
  ParallelGroups &g = p->groupsOf(gen.layout);
  if (!g.member) // no collective: the generator's groups are its own
    return {
        {}, {}, {}, {}, p->datasets[size_t(gen.dataset)].batch * gen.spec.n};
  rlhf_value *prompts =
      rlhf_load(p, gen.dataset, step, p->datasets[size_t(gen.dataset)].batch)
          ->fields.at(gen.promptField);
  LlamaModel model(m.cfg, gen.params,
                   {g.tp.get(), g.tpRank, int(gen.layout.tp)},
                   {g.pp.get(), g.stage, int(gen.layout.pp)});
  return generateRows(p, &model, gen.layout, prompts, gen.spec, step);
}

/// Copies the trainer's weights of `m` (version `version`) into the
/// generator's layout; collective over every rank, and the trainer keeps
/// its own.
void copyToGenerator(rlhf_prog *p, ModelState &m, int64_t version) {
  m.gen.params = weightsCopy(p, m, m.gen.layout);
  m.gen.version = version;
}

/// What the samples generated ahead depend on: the staleness bound, the
/// generate's settings and the generator's layout (each rank keeps its rows).
std::string generatorSpec(const ModelState &m) {
  const GenerateSpec &s = m.gen.spec;
  std::ostringstream out;
  out << "staleness " << m.gen.staleness << ", max_new_tokens " << s.maxNew
      << ", n " << s.n << ", temperature " << s.temperature << ", top_p "
      << s.topP << (s.greedy ? ", greedy" : "") << ", on "
      << layoutStr(m.gen.layout);
  return out.str();
}

/// Reads the samples a checkpoint kept for the iterations after it. Those
/// it lacks (a run resumed with more --steps than it was saved with) are
/// sampled again with the checkpoint's weights. Collective: every rank
/// learns which iterations the generator's ranks found.
void loadAhead(rlhf_prog *p, ModelState &m) {
  fs::path dir = checkpointDir(p, p->resumedFrom);
  ParallelGroups &g = p->groupsOf(m.gen.layout);
  ParamMap t;
  fs::path f = aheadFile(dir, m, p->rank);
  std::map<std::string, std::string> meta;
  if (g.member && fs::exists(f))
    t = loadSafetensors(f.string(), &meta);
  // Samples made under another bound, generate or layout would break the
  // program's staleness or its rows: refused, on every rank at once.
  const std::string made = meta.count("generator") ? meta["generator"] : "",
                    spec = generatorSpec(m);
  at::Tensor differs =
      at::full({1}, int64_t(!made.empty() && made != spec), at::kLong);
  p->world->allReduceSum(differs);
  if (differs.item<int64_t>() > 0)
    throw Error(
        "--resume: the samples '" + m.name + "' generated ahead in '" +
        dir.string() + "' were made with " +
        (made.empty() ? std::string("another generator") : made) +
        ", but this program's generator runs with " + spec +
        "; resume with the program that wrote the checkpoint, or delete '" +
        (dir / (m.name + ".ahead")).string() +
        "' to sample those iterations again with the checkpoint's weights");
  for (int64_t s = p->resumedFrom + 1;
       s <= p->resumedFrom + m.gen.staleness && s < p->steps; ++s) {
    std::string k = "step" + std::to_string(s) + ".";
    at::Tensor found = at::full({1}, int64_t(t.count(k + "seq")), at::kLong);
    p->world->allReduceSum(found);
    const int64_t have = found.item<int64_t>();
    if (have == 0)
      continue;
    if (have != m.gen.layout.size())
      throw Error("--resume: only " + std::to_string(have) + " of the " +
                  std::to_string(m.gen.layout.size()) +
                  " generator ranks of '" + m.name +
                  "' kept their samples for iteration " +
                  std::to_string(s + 1) + " in '" + dir.string() +
                  "' (each keeps its own, " + m.name +
                  ".ahead/rank-R.safetensors: is one missing?); resume with "
                  "the program and worker count that wrote it");
    GeneratedBatch b;
    b.rows = p->datasets[size_t(m.gen.dataset)].batch * m.gen.spec.n;
    if (g.member) {
      b.prompts = t.at(k + "prompts");
      b.seq = t.at(k + "seq");
      b.logprobs = t.at(k + "logprobs");
      b.mask = t.at(k + "mask");
    }
    m.gen.ahead[s] = std::move(b);
  }
}

} // namespace

void rlhf::exec::saveAhead(rlhf_prog *p, const fs::path &dir, int64_t step) {
  for (ModelState &m : p->models) {
    if (!m.gen.active || !p->groupsOf(m.gen.layout).member)
      continue;
    ParamMap t;
    std::map<std::string, std::string> meta{
        {"model", m.name},
        {"after_step", std::to_string(step)},
        {"generator", generatorSpec(m)}};
    for (auto &[s, b] : m.gen.ahead) {
      if (s <= step)
        continue;
      std::string k = "step" + std::to_string(s) + ".";
      t[k + "prompts"] = b.prompts;
      t[k + "seq"] = b.seq;
      t[k + "logprobs"] = b.logprobs;
      t[k + "mask"] = b.mask;
    }
    fs::path f = aheadFile(dir, m, p->rank);
    fs::create_directories(f.parent_path());
    saveSafetensors(f.string(), t, meta);
  }
}

extern "C" {

rlhf_value *rlhf_generate_stale(rlhf_prog *p, int64_t mi, int64_t dataset,
                                const char *field, int64_t step,
                                const int64_t *lay, int64_t maxNew, int64_t n,
                                double temperature, double topP, int64_t greedy,
                                int64_t staleness, const char *label) {
  return guarded(p, label, [&] {
    ModelState &m = modelAt(p, mi);
    AsyncGenerator &gen = m.gen;
    Layout l = layoutFrom(lay);
    if (dataset < 0 || dataset >= int64_t(p->datasets.size()))
      throw Error("dataset index out of range");
    if (gen.active && !sameLayout(gen.layout, l))
      throw Error("model '" + m.name + "' has one generator, laid out as " +
                  layoutStr(gen.layout) + ", but this call runs as " +
                  layoutStr(l));
    if (!gen.active) {
      gen.active = true;
      gen.layout = l;
      gen.staleness = staleness;
      gen.dataset = dataset;
      gen.promptField = field;
      gen.spec = {maxNew,
                  n,
                  temperature,
                  topP,
                  greedy != 0,
                  label,
                  std::max<int64_t>(1, lay[4])};
      p->groupsOf(l);
      if (p->resumedFrom >= 0)
        loadAhead(p, m);
    }
    // The run's first iteration: the generator's first copy, named apart
    // from the update after each train step (one metric, one meaning).
    if (gen.version < 0)
      timed(p, "first weight copy " + m.name, {"realloc", {m.layout, l}}, [&] {
        copyToGenerator(p, m, step);
        return 0;
      });
    return timed(p, label, {"call", {l}}, [&] {
      GeneratedBatch b;
      if (auto it = gen.ahead.find(step); it != gen.ahead.end()) {
        b = std::move(it->second);
        gen.ahead.erase(it);
      } else {
        b = sampleAhead(p, mi, step);
      }
      return generatedValue(p, b, l);
    });
  });
}

void rlhf_weight_update(rlhf_prog *p, int64_t mi, const int64_t *from,
                        const int64_t *to, int64_t lag) {
  guarded(p, "weight update", [&] {
    ModelState &m = modelAt(p, mi);
    AsyncGenerator &gen = m.gen;
    Layout f = layoutFrom(from), t = layoutFrom(to);
    if (!gen.active || !sameLayout(gen.layout, t))
      throw Error("the plan updates the generator of '" + m.name + "' as " +
                  layoutStr(t) + " but it generates " +
                  (gen.active ? "as " + layoutStr(gen.layout) : "in step"));
    if (!sameLayout(m.layout, f))
      throw Error("the plan updates the generator of '" + m.name + "' from " +
                  layoutStr(f) + " but the trainer is laid out as " +
                  layoutStr(m.layout));
    if (lag < 1 || lag > gen.staleness)
      throw Error("weight update lag " + std::to_string(lag) +
                  " is outside 1.." + std::to_string(gen.staleness));
    // The generator samples ahead with the version it has (this
    // iteration's), while the trainer is still busy: the overlap.
    const int64_t step = p->stepIndex;
    for (int64_t s = step + 1; s <= step + gen.staleness && s < p->steps; ++s)
      if (!gen.ahead.count(s)) {
        std::string label = gen.spec.label + " (ahead)";
        gen.ahead[s] = timed(p, label, {"call", {t}, s},
                             [&] { return sampleAhead(p, mi, s); });
      }
    timed(p, "weight update " + m.name, {"realloc", {f, t}}, [&] {
      copyToGenerator(p, m, step + 1);
      return 0;
    });
    return 0;
  });
}

} // extern "C"
