//===- SemaAsync.cpp - losses under asynchronous generation ---------------===//
//
// With `staleness = k`, a model's generation may run up to k versions ahead
// of its training, so the samples a loss trains on come from a behaviour
// policy older than the weights being trained. Plain PPO/GRPO would then
// clip the ratio around a stale policy, and the gradient is biased. A loss
// that trains a generating model must correct for it as decoupled PPO does
// (AReaL): it reads the behaviour log-probs the generation recorded and the
// proximal policy's (an inference of the trained model in this iteration,
// which runs on the trainer's current weights), and weights each token by
// the truncated importance ratio min(exp(prox - behaviour), c).
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

namespace {

/// The ops of `body` that the loss output reads (a binding the loss never
/// uses does not train anything).
std::vector<char> reachLoss(const FnBody &body) {
  std::vector<char> live(body.ops.size(), 0);
  std::vector<int> work;
  for (const auto &[name, id] : body.outputs)
    if (name == "loss" && id >= 0)
      work.push_back(id);
  while (!work.empty()) {
    int id = work.back();
    work.pop_back();
    if (id < 0 || size_t(id) >= live.size() || live[size_t(id)])
      continue;
    live[size_t(id)] = 1;
    for (int a : body.ops[size_t(id)].args)
      work.push_back(a);
  }
  return live;
}

/// The op of `body` that reads input `k`, or -1.
int inputOp(const FnBody &body, size_t k) {
  for (size_t i = 0; i < body.ops.size(); ++i)
    if (body.ops[i].op == "input" && size_t(body.ops[i].number) == k)
      return int(i);
  return -1;
}

/// The live op of `body` among `into` (min, clamp) that takes exp(a - b)
/// for an `a` and `b` that `isA` and `isB` accept, or -1.
int expOfDifference(const FnBody &body, llvm::function_ref<bool(int)> isA,
                    llvm::function_ref<bool(int)> isB,
                    llvm::ArrayRef<llvm::StringRef> into) {
  const std::vector<char> live = reachLoss(body);
  auto usedBy = [&](int id, llvm::StringRef op) {
    for (size_t i = 0; i < body.ops.size(); ++i)
      if (live[i] && body.ops[i].op == op &&
          llvm::is_contained(body.ops[i].args, id))
        return int(i);
    return -1;
  };
  for (size_t i = 0; i < body.ops.size(); ++i) {
    const FnOp &d = body.ops[i];
    if (d.op != "sub" || d.args.size() != 2 || !isA(d.args[0]) ||
        !isB(d.args[1]))
      continue;
    int e = usedBy(int(i), "exp");
    if (e < 0)
      continue;
    for (llvm::StringRef op : into)
      if (int u = usedBy(e, op); u >= 0)
        return u;
  }
  return -1;
}

/// The op of `body`'s loss that takes min/clamp of exp(input `prox` -
/// input `behav`), the truncated importance weight, or -1.
int truncatedImportanceWeight(const FnBody &body, size_t prox, size_t behav) {
  int p = inputOp(body, prox), b = inputOp(body, behav);
  return expOfDifference(
      body, [&](int id) { return id == p; }, [&](int id) { return id == b; },
      {"min", "clamp"});
}

/// Whether the loss clips the policy's ratio exp(model.logprobs(seq) -
/// input `k`): PPO's clamp, taken against that input's log-probs.
bool clipsAgainst(const FnBody &body, size_t k) {
  int in = inputOp(body, k);
  return expOfDifference(
             body,
             [&](int id) {
               return id >= 0 && size_t(id) < body.ops.size() &&
                      body.ops[size_t(id)].op == "logprobs";
             },
             [&](int id) { return id == in; }, {"clamp"}) >= 0;
}

/// Whether op `w` scales the policy-gradient term: through negations and
/// products it reaches a product with a factor that reads the trained
/// model's log-probs. A weight added to the loss has no such product, and
/// its gradient is the unweighted, stale one.
bool scalesPolicyTerm(const FnBody &body, int w) {
  const std::vector<char> live = reachLoss(body);
  // readsPolicy[i]: op i depends on the trained model's log-probs.
  std::vector<char> readsPolicy(body.ops.size(), 0);
  for (size_t i = 0; i < body.ops.size(); ++i) {
    readsPolicy[i] = body.ops[i].op == "logprobs";
    for (int a : body.ops[i].args)
      if (a >= 0 && size_t(a) < i && readsPolicy[size_t(a)])
        readsPolicy[i] = 1;
  }
  std::vector<char> seen(body.ops.size(), 0);
  std::vector<int> work{w};
  while (!work.empty()) {
    int id = work.back();
    work.pop_back();
    for (size_t i = size_t(id) + 1; i < body.ops.size(); ++i) {
      const FnOp &u = body.ops[i];
      if (!live[i] || seen[i] || !llvm::is_contained(u.args, id))
        continue;
      if (u.op == "mul" && u.args.size() == 2) {
        int other = u.args[0] == id ? u.args[1] : u.args[0];
        if (other >= 0 && readsPolicy[size_t(other)])
          return true;
      } else if (u.op != "neg" && u.op != "broadcast" &&
                 !(u.op == "div" && u.args.size() == 2 && u.args[0] == id)) {
        continue;
      }
      seen[i] = 1;
      work.push_back(int(i));
    }
  }
  return false;
}

} // namespace

void Sema::checkStaleness(const Instance &inst) {
  const int64_t k = inst.settings.staleness;
  if (k == 0)
    return;
  const std::vector<Node> &nodes = inst.nodes;
  // A trained model's generation runs ahead.
  auto runsAhead = [&](const Node &g) {
    return g.kind == Node::Kind::Generate && g.model && g.model->trainable &&
           llvm::any_of(nodes, [&](const Node &t) {
             return t.kind == Node::Kind::Train && t.model == g.model;
           });
  };
  // Staleness lets a trained model's generation run ahead; without one it
  // changes nothing, which a user who asked for asynchronous RL would miss.
  // After an error a poisoned generate or train may be what is missing.
  if (!failed && llvm::none_of(nodes, runsAhead))
    warning(inst.loc,
            formatv("staleness = {0} has no effect: no model both generates "
                    "and trains here, so nothing can run ahead; the run is "
                    "planned and trained synchronously",
                    k));
  // Its one generator runs ahead: a later generate has no samples of its
  // own (the lowering refused it; the check and the editor did not).
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!runsAhead(nodes[i]))
      continue;
    auto first = llvm::find_if(nodes, [&](const Node &g) {
      return g.kind == Node::Kind::Generate && g.model == nodes[i].model;
    });
    if (&*first != &nodes[i])
      error(nodes[i].loc,
            formatv("'{0}' generates twice in an iteration, but with "
                    "staleness = {1} its one generator runs ahead; generate "
                    "once and reuse the samples, or run with 'staleness = 0'",
                    nodes[i].model->name, k))
              .attachNote(first->loc)
          << "its first generate";
  }
  for (const Node &train : nodes) {
    if (train.kind != Node::Kind::Train || train.inputs.empty() ||
        train.inputs[0].producer < 0)
      continue;
    // The generations of the trained model: their samples lag.
    std::vector<int> gens;
    for (size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i].kind == Node::Kind::Generate &&
          nodes[i].model == train.model)
        gens.push_back(int(i));
    if (gens.empty())
      continue;
    const Node &loss = nodes[size_t(train.inputs[0].producer)];
    if (!loss.fn)
      continue;
    std::string lag = formatv("'{0}' generates with weights up to {1} "
                              "version{2} old here (staleness = {1})",
                              train.model->name, k, k == 1 ? "" : "s");
    auto noteGen = [&](mlir::InFlightDiagnostic &&d) {
      d.attachNote(mlir::Location(nodes[size_t(gens[0])].loc)) << lag;
    };
    std::optional<size_t> behav, prox;
    for (size_t i = 0; i < loss.inputs.size(); ++i) {
      const Node::Input &in = loss.inputs[i];
      if (in.producer < 0 || in.field != "logprobs")
        continue;
      const Node &from = nodes[size_t(in.producer)];
      if (llvm::is_contained(gens, in.producer))
        behav = i;
      else if (from.kind == Node::Kind::Inference && from.model == train.model)
        prox = i;
    }
    // The fix is written in the algorithm's body: name the model as its
    // parameter there, not as the run's global.
    std::string inBody = train.model->name;
    if (auto it = p.algorithms.find(inst.algorithm); it != p.algorithms.end()) {
      size_t m = 0;
      for (const ast::Param &prm : it->second->params)
        if (prm.type == "model" && m < inst.models.size() &&
            inst.models[m++] == train.model) {
          inBody = prm.name;
          break;
        }
    }
    const std::string fix =
        formatv("use an off-policy loss such as 'decoupled_ppo_loss(g, "
                "prox, adv)' with 'prox = {0}.inference(g.seq)', or run "
                "with 'staleness = 0'",
                inBody);
    if (!behav) {
      noteGen(error(loss.loc,
                    formatv("loss '{0}' trains '{1}' on samples of an older "
                            "policy but does not read their behaviour "
                            "log-probs (the generation's 'logprobs'); {2}",
                            loss.builtin, train.model->name, fix)));
      continue;
    }
    if (!prox) {
      noteGen(error(
          loss.loc,
          formatv("loss '{0}' does not correct for the policy lag: it "
                  "needs the proximal policy's log-probs, an inference of "
                  "'{1}' in this iteration, to clip against instead of the "
                  "stale behaviour policy; {2}",
                  loss.builtin, train.model->name, fix)));
      continue;
    }
    const std::string &b = loss.inputs[*behav].param,
                      &x = loss.inputs[*prox].param;
    std::string why;
    const int weight = truncatedImportanceWeight(*loss.fn, *prox, *behav);
    if (clipsAgainst(*loss.fn, *behav) && !clipsAgainst(*loss.fn, *prox))
      why = formatv("loss '{0}' clips the policy's ratio against the "
                    "behaviour log-probs '{1}', the stale policy decoupled "
                    "PPO corrects for; clip exp(model.logprobs(seq) - {2}) "
                    "against the proximal ones and weight by "
                    "min(exp({2} - {1}), c)",
                    loss.builtin, b, x);
    else if (weight < 0 &&
             truncatedImportanceWeight(*loss.fn, *behav, *prox) >= 0)
      why = formatv("loss '{0}' gets the generation's log-probs as '{1}' and "
                    "the proximal inference's as '{2}', the other way round "
                    "from how it weights them; swap those two arguments",
                    loss.builtin, b, x);
    else if (weight < 0)
      why = formatv("loss '{0}' reads the behaviour and proximal log-probs "
                    "but does not weight by the truncated importance ratio "
                    "min(exp({1} - {2}), c): without the bound one stale "
                    "sample can dominate the gradient",
                    loss.builtin, x, b);
    else if (!scalesPolicyTerm(*loss.fn, weight))
      why = formatv("loss '{0}' computes the truncated importance weight "
                    "min(exp({1} - {2}), c) but does not multiply the "
                    "policy's surrogate by it, so the gradient stays the "
                    "stale one; weight each token's term, as in "
                    "'-w * min(ratio * adv, clamp(ratio, 1 - clip, 1 + clip) "
                    "* adv)'",
                    loss.builtin, x, b);
    if (!why.empty())
      noteGen(error(loss.loc, why));
  }
}
