//===- SemaEval.cpp - held-out evaluation of a run ------------------------===//
//
// `eval = held_out; eval_interval = 20;` in a run block: before the first
// step, every 20 steps and after the last, the statements that score the
// policy's samples run on every prompt of `held_out`, one greedy sample
// each (verl's validation; `eval_samples = k` draws k as the generate draws
// its samples), and train calls fed by the data alone compute their loss
// forward only (OpenRLHF's validation loss of SFT, DPO and reward models).
// The dataset stands in for the run's: the plan's layouts and
// memory must hold for it, so it has the run dataset's fields, none wider,
// and batches no larger, k samples of each no more than a generate makes.
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

#include "rlhf/IR/RLHFOps.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

void Sema::readEval(const PropMap &m, Instance &inst) {
  RunSettings &s = inst.settings;
  setInt(m, "eval_interval", s.evalInterval, 0, mlir::rlhf::kMaxSteps);
  setInt(m, "eval_samples", s.evalSamples, 1, mlir::rlhf::kMaxSamples);
  if (const Property *k = m.lookup("eval_samples"))
    s.evalSamplesLoc = k->loc;
  const Property *e = m.lookup("eval");
  if (!e) {
    for (StringRef key : {"eval_interval", "eval_samples"})
      if (const Property *prop = m.lookup(key))
        error(prop->loc, formatv("'{0}' sets how the run evaluates, but it "
                                 "has no 'eval'; add 'eval = DATASET;' "
                                 "naming the held-out prompts",
                                 key));
    return;
  }
  if (!checkHasValue(*e))
    return;
  s.evalLoc = e->value->loc;
  auto name = evalName(*e->value, "'eval'");
  if (!name ||
      !lookupEntity(*name, EntityKind::Dataset, e->value->loc, "eval dataset"))
    return;
  if (auto it = p.datasets.find(*name); it != p.datasets.end())
    s.evalDataset = &it->second;
}

/// Whether node `i` reads, directly or through other nodes, what a generate
/// made.
static bool fromGenerate(const Instance &inst, int i) {
  return !generatesFeeding(inst.nodes, {i}).empty();
}

/// A reward of generated samples: a score that a host function or a frozen
/// (reward) model computes from them, not from another score. A critic's
/// values and a penalty added to a reward are not.
static bool isSampleScore(const Instance &inst, int i) {
  const Node &n = inst.nodes[size_t(i)];
  if (n.kind != Node::Kind::Host &&
      !(n.kind == Node::Kind::Inference && n.model && !n.model->trainable))
    return false;
  if (!llvm::any_of(n.result.fields, [](const Field &f) {
        return f.type.kind == TensorKind::Score;
      }))
    return false;
  if (llvm::any_of(n.inputs, [](const Node::Input &in) {
        return in.type.kind == TensorKind::Score;
      }))
    return false;
  return fromGenerate(inst, i);
}

/// A train call on data: nothing upstream of it generates, trains or
/// averages weights, so evaluation can run its loss forward on held-out
/// rows (SFT's, DPO's and a reward model's validation loss).
static bool isDataLoss(const Instance &inst, int i) {
  const Node &n = inst.nodes[size_t(i)];
  if (n.kind != Node::Kind::Train)
    return false;
  std::vector<int> producers;
  for (const Node::Input &in : n.inputs)
    producers.push_back(in.producer);
  std::vector<char> upstream = nodesFeeding(inst.nodes, std::move(producers));
  for (size_t u = 0; u < inst.nodes.size(); ++u)
    if (upstream[u] && inst.nodes[u].kind != Node::Kind::Inference &&
        inst.nodes[u].kind != Node::Kind::Host)
      return false;
  return true;
}

void Sema::checkEval(const Instance &inst) {
  const RunSettings &s = inst.settings;
  if (!s.evalDataset)
    return;
  mlir::Location at(s.evalLoc);
  const Dataset &ev = *s.evalDataset;
  if (!inst.dataset) {
    error(at, formatv("'{0}' reads no dataset, so there is none for '{1}' to "
                      "stand in for; evaluation scores the policy's samples "
                      "of a dataset's prompts",
                      inst.algorithm, ev.name));
    return;
  }
  const Dataset &train = *inst.dataset;
  bool ok = true;
  for (const Field &f : train.type.fields) {
    const Field *g = ev.type.find(f.name);
    if (!g || g->type.kind != f.type.kind || g->type.dtype != f.type.dtype ||
        g->type.shape.size() != f.type.shape.size()) {
      error(at, formatv("eval dataset '{0}' has no field '{1}' like '{2}''s "
                        "({3}); list it in its 'fields'",
                        ev.name, f.name, train.name, f.type.str()))
              .attachNote(ev.loc)
          << "'" << ev.name << "' is declared here";
      ok = false;
      continue;
    }
    if (g->type.shape.size() > 1 && g->type.shape[1] > f.type.shape[1]) {
      error(at, formatv("eval dataset '{0}' holds '{1}' {2} tokens wide, but "
                        "'{3}' holds {4}, which the plan is priced for; lower "
                        "its max_prompt_len or max_response_len",
                        ev.name, f.name, g->type.shape[1], train.name,
                        f.type.shape[1]))
              .attachNote(ev.loc)
          << "'" << ev.name << "' is declared here";
      ok = false;
    }
  }
  if (ok && ev.batch > train.batch)
    error(at, formatv("eval dataset '{0}' has batch = {1}, more than the {2} "
                      "of '{3}' that the plan's memory is priced for; lower "
                      "its batch (evaluation covers every row whatever the "
                      "batch)",
                      ev.name, ev.batch, train.batch, train.name))
            .attachNote(ev.loc)
        << "'" << ev.name << "' is declared here";
  // k samples of each prompt of an eval batch must fit where the plan
  // priced a generate's rows.
  if (ok && ev.batch <= train.batch)
    for (const Node &n : inst.nodes) {
      if (n.kind != Node::Kind::Generate || n.result.fields.empty() ||
          n.result.fields.front().type.shape.empty())
        continue;
      const int64_t rows = n.result.fields.front().type.shape[0];
      if (ev.batch * s.evalSamples <= rows)
        continue;
      error(s.evalSamplesLoc ? mlir::Location(s.evalSamplesLoc) : at,
            formatv("evaluation draws {0} sample{1} of each of the {2} "
                    "prompts in a batch of '{3}', {4} in all, but the plan "
                    "prices this generate for {5}; lower eval_samples or "
                    "'{3}''s batch",
                    s.evalSamples, s.evalSamples == 1 ? "" : "s", ev.batch,
                    ev.name, ev.batch * s.evalSamples, rows))
              .attachNote(n.loc)
          << "the generate";
      break;
    }
  bool scores = false, losses = false;
  for (size_t i = 0; i < inst.nodes.size(); ++i) {
    scores |= isSampleScore(inst, int(i));
    losses |= isDataLoss(inst, int(i));
  }
  if (!scores && losses && s.evalSamples > 1)
    error(s.evalSamplesLoc ? mlir::Location(s.evalSamplesLoc) : at,
          formatv("eval_samples draws samples of each held-out prompt, but "
                  "'{0}' evaluates only the loss of its train calls, which "
                  "samples nothing; remove eval_samples",
                  inst.algorithm));
  if (scores || losses)
    return;
  error(at, formatv("'{0}' neither scores generated samples nor trains on "
                    "its data alone, so evaluation has nothing to report; "
                    "eval reports the reward of samples generated from "
                    "held-out prompts (a reward model's inference, "
                    "exact_match, script_reward or a function's score) or "
                    "the loss of a train call fed by the dataset and "
                    "inference, as SFT, DPO and reward-model training are",
                    inst.algorithm));
}
