//===- SemaPlace.cpp - @place annotations ---------------------------------===//
//
// A pinned mesh and strategy on a model call: the mesh slice of the
// cluster, dp/tp/pp and micro-batches that fill it, and offload, recompute
// and ZeRO where the call allows them.
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

#include "llvm/ADT/StringExtras.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

/// Sequence parallelism splits every sequence over sp ranks: a generate call
/// has one token per sequence to split at each decode step, there are no
/// pipeline stages, and the tokens must divide. In attention, USP's Ulysses
/// ranks (inside a node) split each rank's heads and the rest of sp is a
/// ring (mlir::rlhf::splitSp picks a Ulysses degree that splits the query
/// heads); kv heads repeat up to a multiple of it (ulyssesToHeads), so any
/// kv head count works.
mlir::LogicalResult Sema::checkSequenceParallel(const Annotation &an,
                                                const Node &n,
                                                const Placement &pl) {
  if (n.kind == Node::Kind::Generate) {
    error(an.loc, formatv("generation runs with sp = 1: each decode step has "
                          "one new token per sequence to split; drop "
                          "'sp = {0}' here",
                          pl.sp));
    return mlir::failure();
  }
  // The runtime's model splits a sequence over sp ranks as one pipeline
  // stage: its weights would be a stage's shard and its rows the whole.
  if (pl.pp > 1) {
    error(an.loc, formatv("sequence parallelism runs without pipeline "
                          "stages; drop 'pp = {0}' or 'sp = {1}' (tp and dp "
                          "combine with sp)",
                          pl.pp, pl.sp));
    return mlir::failure();
  }
  // A length sp does not divide is padded at its end (spPaddedLength).
  return mlir::success();
}

void Sema::checkAnnotation(const Annotation &an, Node &n,
                           llvm::StringMap<Local> &env) {
  if (an.name != "place") {
    error(an.loc, "unknown annotation '@" + an.name +
                      "'; there are '@place(mesh = c[0:8], dp = 2, tp = 4, "
                      "pp = 1)' and '@filter_groups(max_rounds = 8)'" +
                      didYouMean(an.name, {"place", "filter_groups"}));
    return;
  }
  if (n.kind == Node::Kind::Host) {
    error(an.loc,
          "'@place' pins model calls; host functions run on the controller");
    return;
  }
  if (n.kind == Node::Kind::Ema) {
    error(an.loc, "'@place' pins generate, inference and train calls; 'ema' "
                  "runs where its models are");
    return;
  }
  if (n.placement) {
    error(an.loc, "a call has at most one '@place'");
    return;
  }
  Placement pl;
  pl.loc = an.loc;
  bool haveMesh = false;
  const sema::Cluster *c = current->cluster;
  llvm::StringMap<const Arg *> seen;
  for (const Arg &a : an.args) {
    if (!a.name.empty()) {
      auto [it, fresh] = seen.try_emplace(a.name, &a);
      if (!fresh) {
        error(a.loc, "'" + a.name + "' is given twice")
            .attachNote(it->second->loc)
            .append("first given here");
        return;
      }
    }
    if (a.name == "mesh") {
      haveMesh = true;
      const Expr *base = a.value.get();
      int64_t lo = 0, hi = -1;
      if (base->kind == Expr::Kind::Slice) {
        auto l = evalInt(*base->lo, "mesh start", 0, int64_t(1) << 30);
        // An end at or below the start is reported with the cluster's size.
        auto h = evalInt(*base->hi, "mesh end", 0, int64_t(1) << 30);
        if (!l || !h)
          return;
        lo = *l;
        hi = *h;
        base = base->base.get();
      }
      if (base->kind != Expr::Kind::Name || !p.clusters.count(base->text)) {
        error(base->loc,
              "mesh must be a cluster or a slice of one, such as c[0:8]");
        return;
      }
      if (c && base->text != c->name) {
        error(base->loc, formatv("mesh is on cluster '{0}', but this run uses "
                                 "cluster '{1}'",
                                 base->text, c->name));
        return;
      }
      c = &p.clusters.at(base->text);
      if (hi < 0)
        hi = c->gpus();
      if (lo >= hi || hi > c->gpus()) {
        error(a.value->loc,
              formatv("mesh [{0}:{1}] is not a non-empty range of "
                      "the {2} GPUs of cluster '{3}'",
                      lo, hi, c->gpus(), c->name));
        return;
      }
      pl.firstGpu = lo;
      pl.numGpus = hi - lo;
      continue;
    }
    if (a.name == "offload" || a.name == "recompute" || a.name == "zero") {
      if (a.value->kind != Expr::Kind::Bool) {
        error(a.value->loc, formatv("'{0}' is true or false", a.name));
        return;
      }
      auto [flag, flagLoc] =
          a.name == "offload"     ? std::tie(pl.offload, pl.offloadLoc)
          : a.name == "recompute" ? std::tie(pl.recompute, pl.recomputeLoc)
                                  : std::tie(pl.zero, pl.zeroLoc);
      flag = a.value->boolean;
      flagLoc = a.loc;
      continue;
    }
    int64_t *dst = a.name == "dp"    ? &pl.dp
                   : a.name == "tp"  ? &pl.tp
                   : a.name == "pp"  ? &pl.pp
                   : a.name == "mbs" ? &pl.microBatches
                   : a.name == "sp"  ? &pl.sp
                                     : nullptr;
    if (a.name.empty()) {
      error(a.loc,
            "'@place' settings are named: write 'mesh = c[0:8]', 'dp = 2'...");
      return;
    }
    if (!dst) {
      std::vector<std::string> names;
      for (const PropSpec &spec : kPlaceSettings)
        names.push_back(spec.name);
      std::string list = llvm::join(llvm::ArrayRef(names).drop_back(), ", ") +
                         " and " + names.back();
      error(a.loc, formatv("unknown '@place' setting '{0}' (settings are "
                           "{1}){2}",
                           a.name, list, didYouMean(a.name, names)));
      return;
    }
    auto v =
        evalInt(*a.value, "'" + a.name + "'", 1, mlir::rlhf::kMaxPlaceDegree);
    if (!v)
      return;
    *dst = *v;
  }
  if (!haveMesh) {
    error(an.loc, "'@place' needs a mesh, such as 'mesh = c[0:8]'");
    return;
  }
  if (pl.dp * pl.tp * pl.pp * pl.sp != pl.numGpus) {
    if (pl.sp == 1)
      error(an.loc,
            formatv("dp*tp*pp = {0}*{1}*{2} = {3}, but the mesh has {4} "
                    "GPUs; the product must equal the mesh size",
                    pl.dp, pl.tp, pl.pp, pl.dp * pl.tp * pl.pp, pl.numGpus));
    else
      error(an.loc, formatv("dp*tp*pp*sp = {0}*{1}*{2}*{3} = {4}, but the "
                            "mesh has {5} GPUs; the product must equal the "
                            "mesh size",
                            pl.dp, pl.tp, pl.pp, pl.sp,
                            pl.dp * pl.tp * pl.pp * pl.sp, pl.numGpus));
    return;
  }
  if (c && pl.tp > c->gpusPerNode) {
    error(an.loc, formatv("tp = {0} spans nodes; tensor parallelism must stay "
                          "within the {1} GPUs of a node",
                          pl.tp, c->gpusPerNode));
    return;
  }
  if (int64_t g = c ? mlir::rlhf::tpGroupAcrossNodes(pl.firstGpu, pl.numGpus,
                                                     pl.tp, c->gpusPerNode)
                    : -1;
      g >= 0) {
    error(an.loc, formatv("the tensor-parallel group of GPUs [{0}:{1}] spans "
                          "two nodes; start the mesh at a multiple of tp = {2} "
                          "within a node",
                          g, g + pl.tp, pl.tp));
    return;
  }
  const sema::Arch &arch = n.model->arch;
  if (arch.heads % pl.tp || arch.kvHeads % pl.tp) {
    error(an.loc,
          arch.heads % pl.tp
              ? formatv("tp = {0} does not divide the {1} heads of '{2}'",
                        pl.tp, arch.heads, n.model->name)
                    .str()
              : formatv("tp = {0} does not divide the {1} kv heads of '{2}' "
                        "(it divides its {3} heads): tensor parallelism "
                        "splits both",
                        pl.tp, arch.kvHeads, n.model->name, arch.heads)
                    .str());
    return;
  }
  if (pl.sp > 1 && mlir::failed(checkSequenceParallel(an, n, pl)))
    return;
  if (pl.pp > arch.layers) {
    error(an.loc, formatv("pp = {0} exceeds the {1} layers of '{2}'", pl.pp,
                          arch.layers, n.model->name));
    return;
  }
  int64_t N = n.inputs.empty() ? 0 : n.inputs.front().type.batch();
  if (n.kind == Node::Kind::Generate)
    N *= int64_t(n.attr("n", 1));
  if (N && N % (pl.dp * pl.microBatches)) {
    std::string fix;
    if (N % pl.dp) {
      fix = formatv("; choose a dp that divides {0}", N).str();
    } else {
      // The mbs values that would do, smallest first.
      llvm::SmallVector<std::string> ok;
      int64_t rows = N / pl.dp, m = 1;
      for (; m <= rows && ok.size() < 6; ++m)
        if (rows % m == 0)
          ok.push_back(std::to_string(m));
      fix = "; choose mbs = " + llvm::join(ok, ", ") +
            (m <= rows ? ", ... (a divisor of " + std::to_string(rows) + ")"
                       : "");
    }
    error(an.loc, formatv("batch of {0} sequences does not split over dp = {1} "
                          "with mbs = {2} micro-batches{3}",
                          N, pl.dp, pl.microBatches, fix));
    return;
  }
  if (pl.offload && n.model->trainable) {
    error(pl.offloadLoc, formatv("'{0}' is trainable and cannot be offloaded; "
                                 "offload keeps a frozen model's weights in "
                                 "host memory between its calls",
                                 n.model->name));
    return;
  }
  if (pl.recompute && n.kind != Node::Kind::Train) {
    error(pl.recomputeLoc,
          "'recompute' applies to train calls: it trades a second forward "
          "pass in backward for the activations training keeps; drop it "
          "here");
    return;
  }
  if (pl.zero && n.kind != Node::Kind::Train) {
    error(pl.zeroLoc, "'zero' applies to train calls: it shards the "
                      "optimizer state that training keeps; drop it here");
    return;
  }
  if (pl.zero && pl.dp * pl.sp < 2) {
    error(pl.zeroLoc, "'zero' slices the optimizer state over the ranks "
                      "that hold the same weights (dp x sp), and with dp = "
                      "sp = 1 there is one; raise dp or sp, or drop 'zero'");
    return;
  }
  if (pl.offload && c && !(c->hardware->hostBandwidth > 0)) {
    error(pl.offloadLoc, formatv("hardware '{0}' declares no host_bandwidth; "
                                 "add 'host_bandwidth = ...' (the GPU's PCIe "
                                 "link, one direction) to offload",
                                 c->hardware->name));
    return;
  }
  (void)env;
  n.placement = pl;
}
