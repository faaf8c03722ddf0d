//===- SemaFilter.cpp - @filter_groups: DAPO's dynamic sampling
//------------===//
//
// A prompt whose samples all score alike gives GRPO-style advantages of zero:
// its group carries no gradient and only dilutes the batch. DAPO (Yu et al.
// 2025) drops such groups and draws more prompts until the batch is full.
// `@filter_groups` on the statement that scores the samples says so: the
// statements before it (which must all feed the score) run again on further
// batches, and the statements after it see the kept groups only.
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

/// A number as written: 6, 0.5, 1e-06.
static std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// The dataset's batch (its prompts), or 0.
static int64_t datasetBatch(const Instance *inst) {
  return inst && inst->dataset ? inst->dataset->batch : 0;
}

/// `r` with the rows of `to` prompts where it has those of `from`: rows per
/// prompt or per sample alike (a field of other rows stays as it is).
static RecordType withRows(RecordType r, int64_t from, int64_t to) {
  for (Field &f : r.fields)
    if (!f.type.shape.empty() && f.type.shape[0] % from == 0)
      f.type.shape[0] = f.type.shape[0] / from * to;
  return r;
}

void Sema::readGenBatch(const AlgorithmDecl &alg, llvm::StringMap<Local> &env) {
  genBatch = 0;
  for (const Stmt &s : alg.body)
    for (const Annotation &an : s.annotations)
      if (an.name == "filter_groups") {
        for (const Arg &a : an.args)
          if (a.name == "gen_batch") {
            if (auto v = evalInt(*a.value, "'gen_batch'", 1, 1 << 20))
              genBatch = *v;
            break; // a second one is reported with the others
          }
        // The statements up to the filter see a round's rows.
        const int64_t batch = datasetBatch(current);
        if (genBatch > 0 && batch > 0 && genBatch != batch)
          for (auto &kv : env)
            if (kv.second.value.kind == Value::Dataset)
              kv.second.value.record =
                  withRows(kv.second.value.record, batch, genBatch);
        return; // a second filter is an error at its statement
      }
}

void Sema::keepFilteredRows(llvm::StringMap<Local> &env) {
  const int64_t batch = datasetBatch(current);
  if (!current->filter)
    return;
  const FilterGroups &f = *current->filter;
  if (f.genBatch <= 0 || batch <= 0 || f.genBatch == batch)
    return;
  for (auto &kv : env) {
    Value &v = kv.second.value;
    if (v.kind == Value::Dataset ||
        (v.kind == Value::Record && v.producer >= 0 && v.producer <= f.node))
      v.record = withRows(v.record, f.genBatch, batch);
  }
}

void Sema::readFilterAnnotation(const Annotation &an, int node) {
  if (current->filter) {
    error(an.loc, "an iteration has at most one '@filter_groups'")
            .attachNote(mlir::Location(current->filter->loc))
        << "the first is here";
    return;
  }
  FilterGroups f;
  f.loc = an.loc;
  f.node = node;
  llvm::StringMap<const Arg *> seen;
  bool ok = true;
  for (const Arg &a : an.args) {
    if (a.name.empty()) {
      error(a.loc, "'@filter_groups' settings are named: write "
                   "'max_rounds = 8'");
      ok = false;
      continue;
    }
    if (auto [it, fresh] = seen.try_emplace(a.name, &a); !fresh) {
      error(a.loc, "'" + a.name + "' is given twice")
              .attachNote(it->second->loc)
          << "first given here";
      ok = false;
      continue;
    }
    if (a.name == "max_rounds") {
      if (auto v = evalInt(*a.value, "'max_rounds'", 1, 1000))
        f.maxRounds = *v;
      else
        ok = false;
    } else if (a.name == "gen_batch") {
      // Read (and reported) before the statements were typed.
      if (genBatch > 0)
        f.genBatch = genBatch;
      else
        ok = false;
    } else if (a.name == "min_std" || a.name == "expected_rounds") {
      auto v = evalNumber(*a.value, UnitDim::None, "'" + a.name + "'");
      double lo = a.name == "min_std" ? 0.0 : 1.0;
      if (v && *v < lo) {
        error(a.value->loc, formatv("'{0}' is at least {1}, not {2}", a.name,
                                    num(lo), num(*v)));
        v.reset();
      }
      if (!v)
        ok = false;
      else
        (a.name == "min_std" ? f.minStd : f.expectedRounds) = *v;
    } else {
      error(a.loc,
            formatv("unknown '@filter_groups' setting '{0}' (settings are "
                    "max_rounds, min_std, expected_rounds and gen_batch){1}",
                    a.name,
                    didYouMean(a.name, {"max_rounds", "min_std",
                                        "expected_rounds", "gen_batch"})));
      ok = false;
    }
  }
  if (ok && f.expectedRounds > double(f.maxRounds)) {
    error(seen.lookup("expected_rounds")->loc,
          formatv("'expected_rounds = {0}' is more than the {1} rounds "
                  "'max_rounds' allows; raise max_rounds or expect fewer",
                  num(f.expectedRounds), f.maxRounds));
    ok = false;
  }
  // A round of gen_batch prompts: enough rounds must be able to fill a
  // batch, and the planner must price at least as many as that takes.
  const int64_t batch = datasetBatch(current);
  const int64_t drawn = f.genBatch > 0 ? f.genBatch : batch;
  if (ok && batch > 0 && f.maxRounds * drawn < batch) {
    error(seen.count("max_rounds") ? seen.lookup("max_rounds")->loc
                                   : seen.lookup("gen_batch")->loc,
          formatv("{0} rounds (max_rounds) of {1} prompts (gen_batch) cannot "
                  "fill a batch of {2}; raise max_rounds or gen_batch",
                  f.maxRounds, drawn, batch));
    ok = false;
  }
  if (ok && batch > 0 && f.expectedRounds * double(drawn) < double(batch)) {
    error(seen.count("expected_rounds") ? seen.lookup("expected_rounds")->loc
                                        : seen.lookup("gen_batch")->loc,
          formatv("'expected_rounds = {0}' rounds of {1} prompts (gen_batch) "
                  "draw fewer than the {2} a batch keeps, so the plan would "
                  "price too little; expect at least {3} rounds",
                  num(f.expectedRounds), drawn, batch,
                  num(double(batch) / double(drawn))));
    ok = false;
  }
  // A bad setting is reported; the filter is still recorded, so that the
  // statements before it are not also called unused or misplaced.
  (void)ok;
  current->filter = f;
}

void Sema::checkFilter(Instance &inst) {
  if (!inst.filter)
    return;
  FilterGroups &f = *inst.filter;
  const std::vector<Node> &nodes = inst.nodes;
  if (f.node < 0 || f.node >= int(nodes.size()))
    return; // the statement failed and said why
  const Node &scored = nodes[size_t(f.node)];
  mlir::Location at(f.loc);
  if (scored.kind != Node::Kind::Host && scored.kind != Node::Kind::Inference) {
    error(at, formatv("'@filter_groups' goes on the statement that scores "
                      "the samples, such as 'r = exact_match(g.seq, "
                      "p.answer);', not on a {0} call",
                      nodeKindName(scored.kind)));
    return;
  }
  if (inst.settings.staleness > 0) {
    error(at, formatv("'@filter_groups' redraws the batch of a synchronous "
                      "iteration, but this run lets generation run "
                      "{0} versions ahead (staleness = {0}); drop the "
                      "staleness or the filter",
                      inst.settings.staleness));
    return;
  }
  const Field *score = nullptr;
  for (const Field &fd : scored.result.fields)
    if (fd.type.kind == TensorKind::Score && fd.type.shape.size() == 1) {
      if (score) {
        error(at, formatv("'@filter_groups' needs one score to compare, but "
                          "this statement gives several ({0}); score in a "
                          "statement of its own",
                          scored.result.str()));
        return;
      }
      score = &fd;
    }
  if (!score) {
    error(at, formatv("'@filter_groups' compares the samples' scores, but "
                      "this statement gives no score per sequence ({0})",
                      scored.result.str()));
    return;
  }
  std::vector<int> gens = generatesFeeding(nodes, {f.node});
  if (gens.size() != 1) {
    error(at, gens.empty()
                  ? "'@filter_groups' keeps prompts whose samples score "
                    "differently, but this score comes from no generate; "
                    "score a generate's samples"
                  : "'@filter_groups' groups the samples of one generate, "
                    "but this score comes from several; score one");
    return;
  }
  const Node &gen = nodes[size_t(gens[0])];
  const auto n = int64_t(gen.attr("n", 1));
  if (n < 2) {
    error(at, "each prompt has one sample (n = 1), and a group of one never "
              "varies; generate with n = 2 or more")
            .attachNote(mlir::Location(gen.loc))
        << "the generate is here";
    return;
  }
  const int64_t batch = datasetBatch(&inst);
  const int64_t drawn = f.genBatch > 0 ? f.genBatch : batch;
  if (batch <= 0 || score->type.batch() != drawn * n) {
    error(at, formatv("'@filter_groups' keeps whole groups of the {0} prompts "
                      "a round draws, but the score has {1} rows, not {0} x "
                      "n = {2}",
                      drawn, score->type.batch(), drawn * n));
    return;
  }
  f.field = score->name;
  f.group = n;
  // Every statement before the filter runs again for each batch drawn: one
  // that does not feed the score would run on the groups the filter drops.
  std::vector<char> feeds = nodesFeeding(nodes, {f.node});
  for (int i = 0; i < f.node; ++i) {
    if (feeds[size_t(i)])
      continue;
    const Node &other = nodes[size_t(i)];
    std::string what =
        other.name.empty()
            ? "this " + std::string(nodeKindName(other.kind)) + " call"
            : "'" + other.name + "'";
    error(mlir::Location(other.loc),
          formatv("{0} runs before '@filter_groups' but does not feed its "
                  "score, so it would run on every batch drawn, dropped "
                  "groups included; move it after the filtered statement, "
                  "where it runs on the kept groups",
                  what))
            .attachNote(at)
        << "the filter is here";
  }
}
