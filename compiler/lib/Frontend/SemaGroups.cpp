//===- SemaGroups.cpp - group baselines against samples per prompt --------===//
//
// GRPO, RLOO and their kin compare each sample with the other samples of
// its prompt: a function's group_* ops take rows in groups of `group`, and
// a generate with n samples per prompt lays its rows out in groups of n.
// A group of another size mixes prompts, and the baseline is then another
// prompt's reward: the program runs, and learns worse, without a word.
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

std::vector<char>
rlhfc::sema::detail::nodesFeeding(const std::vector<Node> &nodes,
                                  std::vector<int> producers,
                                  bool stopAtGenerates) {
  std::vector<char> seen(nodes.size(), 0);
  while (!producers.empty()) {
    int i = producers.back();
    producers.pop_back();
    if (i < 0 || seen[size_t(i)])
      continue;
    seen[size_t(i)] = 1;
    if (stopAtGenerates && nodes[size_t(i)].kind == Node::Kind::Generate)
      continue;
    for (const Node::Input &in : nodes[size_t(i)].inputs)
      producers.push_back(in.producer);
  }
  return seen;
}

std::vector<int>
rlhfc::sema::detail::generatesFeeding(const std::vector<Node> &nodes,
                                      std::vector<int> producers) {
  std::vector<char> seen = nodesFeeding(nodes, std::move(producers), true);
  std::vector<int> gens;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (seen[i] && nodes[i].kind == Node::Kind::Generate)
      gens.push_back(int(i));
  return gens;
}

void Sema::checkGroups(const Instance &inst) {
  const std::vector<Node> &nodes = inst.nodes;
  for (const Node &n : nodes) {
    if (n.kind != Node::Kind::Host || !n.fn)
      continue;
    int64_t group = 0;
    for (const FnOp &op : n.fn->ops)
      if (llvm::StringRef(op.op).starts_with("group_"))
        group = op.group;
    if (group <= 0)
      continue;
    std::vector<int> producers;
    for (const Node::Input &in : n.inputs)
      producers.push_back(in.producer);
    std::vector<int> gens = generatesFeeding(nodes, std::move(producers));
    if (gens.size() != 1)
      continue;
    const Node &gen = nodes[size_t(gens[0])];
    const auto samples = int64_t(gen.attr("n", 1));
    if (samples == group)
      continue;
    std::string who = gen.name.empty() ? "its generate" : "'" + gen.name + "'";
    // A group dividing n stays within one prompt but sees only part of
    // its samples; any other size mixes prompts.
    std::string effect =
        samples % group == 0
            ? formatv("each prompt's samples fall into {0} groups, and a "
                      "sample is measured against {1} of its {2} siblings",
                      samples / group, group - 1, samples - 1)
                  .str()
            : "each group mixes prompts, and a sample is measured against "
              "other prompts' rewards";
    mlir::InFlightDiagnostic d = mlir::emitWarning(
        mlir::Location(n.loc),
        formatv("'{0}' compares rows in groups of {1}, but {2} samples "
                "n = {3} per prompt: {4}; generate with n = {1}, or give "
                "group = {3}",
                n.builtin, group, who, samples, effect));
    d.attachNote(mlir::Location(gen.loc))
        << who << " samples n = " << samples << " here";
  }
}
