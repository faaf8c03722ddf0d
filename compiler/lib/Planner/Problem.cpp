//===- Problem.cpp - calls, candidates and their costs from rlhf IR -------===//

#include "Hierarchy.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>

using namespace rlhfc;
using namespace rlhfc::plan;
using namespace mlir;
namespace r = mlir::rlhf;

namespace {

double tensorBytes(Type t) {
  auto rt = cast<RankedTensorType>(t);
  double n = 1;
  for (int64_t d : rt.getShape())
    n *= double(d);
  return n * std::max<unsigned>(1, rt.getElementTypeBitWidth() / 8);
}

/// The smallest divisor of `n` that is at least `lo` (0 if none).
int64_t divisorAtLeast(int64_t n, int64_t lo) {
  for (int64_t d = std::max<int64_t>(1, lo); d <= n; ++d)
    if (n % d == 0)
      return d;
  return 0;
}

} // namespace

Candidate Candidate::priced(const cost::Arch &arch, const cost::Hardware &hw,
                            const cost::Strategy &s,
                            const cost::CallShape &shape) {
  Candidate cand;
  cand.s = s;
  cand.devices = s.devices();
  cost::Estimate e = cost::estimateCall(arch, hw, s, shape);
  cand.time = e.time.total();
  cand.load = e.time.load;
  cand.mem = e.memory;
  return cand;
}

size_t
Problem::LayoutPairHash::operator()(const std::array<int64_t, 9> &k) const {
  size_t h = 0;
  for (int64_t v : k)
    h = h * 1000003u ^ size_t(v);
  return h;
}

void Problem::indexCandidates() const {
  fastest.assign(calls.size(), 0.0);
  smallestArea.assign(calls.size(), 0.0);
  for (size_t c = 0; c < calls.size(); ++c) {
    if (cands[c].empty())
      continue;
    fastest[c] = smallestArea[c] = std::numeric_limits<double>::infinity();
    for (const Candidate &k : cands[c]) {
      fastest[c] = std::min(fastest[c], k.time);
      smallestArea[c] = std::min(smallestArea[c], k.time * double(k.devices));
    }
  }
}

double Problem::fastestTime(size_t call) const {
  if (fastest.size() != calls.size())
    indexCandidates();
  return fastest[call];
}

double Problem::leastArea(size_t call) const {
  if (smallestArea.size() != calls.size())
    indexCandidates();
  return smallestArea[call];
}

const cost::MoveEstimate &Problem::reallocMove(int model,
                                               const cost::Strategy &f,
                                               const cost::Strategy &t) const {
  // The estimate sees GPUs only relative to the two meshes and to node
  // boundaries: shifted by whole nodes, or moved apart while they share no
  // node, two layouts reallocate alike.
  const int64_t gpn = hw.gpusPerNode;
  auto nodesOf = [&](const cost::Strategy &s) {
    return std::pair(s.firstGpu / gpn, (s.firstGpu + s.devices() - 1) / gpn);
  };
  auto [f0, f1] = nodesOf(f);
  auto [t0, t1] = nodesOf(t);
  int64_t fFirst, tFirst;
  if (f1 < t0 || t1 < f0) {
    fFirst = f.firstGpu % gpn;
    tFirst = (f1 - f0 + 1) * gpn + t.firstGpu % gpn;
  } else {
    int64_t base = std::min(f0, t0) * gpn;
    fFirst = f.firstGpu - base;
    tFirst = t.firstGpu - base;
  }
  // Weights are laid out alike over dp and sp, so their product keys.
  std::array<int64_t, 9> key = {model,  fFirst,      f.dp * f.sp, f.tp, f.pp,
                                tFirst, t.dp * t.sp, t.tp,        t.pp};
  auto it = reallocCache.find(key);
  if (it != reallocCache.end())
    return it->second;
  cost::Strategy fn = f, tn = t;
  fn.firstGpu = fFirst;
  tn.firstGpu = tFirst;
  return reallocCache
      .emplace(key, cost::estimateReallocFast(models[model].arch, hw, fn, tn))
      .first->second;
}

Problem
Problem::restricted(llvm::function_ref<bool(size_t, const Candidate &)> keep,
                    std::vector<std::vector<int>> &from) const {
  Problem q = *this;
  q.fastest.clear();
  q.smallestArea.clear();
  q.windowCache.reset();
  from.assign(calls.size(), {});
  for (size_t c = 0; c < calls.size(); ++c) {
    q.cands[c].clear();
    for (size_t k = 0; k < cands[c].size(); ++k)
      if (keep(c, cands[c][k])) {
        q.cands[c].push_back(cands[c][k]);
        from[c].push_back(int(k));
      }
  }
  return q;
}

std::vector<plan::detail::Mesh> plan::detail::meshes(int64_t nodes, int64_t gpn,
                                                     bool halfNodes) {
  std::vector<Mesh> out;
  for (int64_t n = 0; n < nodes; ++n)
    for (int64_t size = 1; size < gpn; size *= 2)
      for (int64_t off = 0; off + size <= gpn; off += size)
        out.push_back({n * gpn + off, size});
  for (int64_t count = 1; count <= nodes; ++count)
    for (int64_t first = 0; first + count <= nodes; ++first)
      out.push_back({first * gpn, count * gpn});
  // Odd counts only: an even count is a whole-node size, offered above at
  // every node boundary.
  if (halfNodes && gpn % 2 == 0)
    for (int64_t halves = 3; halves < 2 * nodes; halves += 2)
      for (int64_t first = 0; first + halves <= 2 * nodes; ++first)
        out.push_back({first * gpn / 2, halves * gpn / 2});
  return out;
}

/// A call whose layout matches its model's previous call needs no
/// reallocation, which can outweigh a slower strategy (a critic inferring
/// in the pipeline it trains in). The per-mesh cut keeps only the fastest
/// few, so each call also gets, from `fitting`, its fastest strategy in
/// every layout that another call of its model has.
void plan::detail::shareLayouts(
    Problem &p, const std::vector<std::vector<Candidate>> &fitting) {
  // Offloaded weights rest in host memory, in no layout.
  auto residentAlike = [](const cost::Strategy &a, const cost::Strategy &b) {
    return !a.offload && !b.offload && cost::sameLayout(a, b);
  };
  for (size_t c = 0; c < p.calls.size(); ++c) {
    if (p.calls[c].host || p.calls[c].pinned)
      continue;
    for (size_t o = 0; o < p.calls.size(); ++o) {
      if (o == c || p.calls[o].host || p.calls[o].model != p.calls[c].model)
        continue;
      for (size_t k = 0; k < p.cands[o].size(); ++k) {
        const cost::Strategy want = p.cands[o][k].s;
        if (llvm::any_of(p.cands[c], [&](const plan::Candidate &x) {
              return residentAlike(x.s, want);
            }))
          continue;
        const plan::Candidate *best = nullptr;
        for (const plan::Candidate &x : fitting[c])
          if (residentAlike(x.s, want) && (!best || x.time < best->time))
            best = &x;
        if (best)
          p.cands[c].push_back(*best);
      }
    }
  }
}

namespace {

/// Sequence-parallel degrees worth offering a call: Ulysses pays an
/// all-to-all per layer and pass, which short sequences do not earn back,
/// so only from kMinSpTokens up; never for generation (one token per step)
/// or with pipeline stages (the runtime's model has neither). sp must split
/// the GPUs left; a sequence it does not split is padded (spPaddedLength)
/// and priced so. Degrees beyond the heads per tp rank run as a ring
/// (mlir::rlhf::splitSp).
constexpr int64_t kMinSpTokens = 8192;
std::vector<int64_t> spChoices(const cost::CallShape &c, int64_t gpusLeft) {
  std::vector<int64_t> out = {1};
  if (c.kind == cost::CallKind::Generate || c.seqLen < kMinSpTokens)
    return out;
  for (int64_t sp = 2; sp <= gpusLeft; sp *= 2)
    if (gpusLeft % sp == 0)
      out.push_back(sp);
  return out;
}

} // namespace

int plan::detail::addCandidates(Problem &p, const ProblemOptions &opts,
                                llvm::ArrayRef<plan::detail::Mesh> mesh,
                                std::vector<std::vector<Candidate>> &fitting) {
  for (size_t ci = 0; ci < p.calls.size(); ++ci) {
    const Call &c = p.calls[ci];
    if (c.host || c.pinned)
      continue;
    const cost::Arch &arch = p.models[c.model].arch;
    auto price = [&](const cost::Strategy &s) {
      return Candidate::priced(arch, p.hw, s, c.shape);
    };
    const ::rlhf::ModelShape &ms = arch.shape;
    int64_t rows =
        c.shape.kind == cost::CallKind::Train
            ? c.shape.batch / std::max<int64_t>(1, c.shape.minibatches)
            : c.shape.batch;
    // Train strategies with and without ZeRO (optimizer state and step
    // sliced over dp; its all-gather is not hidden). Recomputation (one
    // forward pass more), alone or with ZeRO, saves memory for time: all of
    // it when opts.trainSavers asks, else where the plain strategy does not
    // fit, and only when nothing else fits this call.
    std::vector<Candidate> saving;
    for (auto [first, size] : mesh) {
      std::vector<Candidate> here, savers;
      for (int64_t tp = 1; tp <= std::min(size, p.hw.gpusPerNode); tp *= 2) {
        if (size % tp || ms.heads % tp || ms.kvHeads % tp)
          continue;
        // With 9 GPUs per node, tp = 2 on whole nodes puts a group on two.
        if (r::tpGroupAcrossNodes(first, size, tp, p.hw.gpusPerNode) >= 0)
          continue;
        const bool gen = c.shape.kind == cost::CallKind::Generate;
        for (int64_t sp : spChoices(c.shape, size / tp))
          for (int64_t pp = 1; pp <= size / tp / sp && pp <= ms.layers; ++pp) {
            if ((size / tp / sp) % pp || (sp > 1 && pp > 1))
              continue;
            int64_t dp = size / tp / sp / pp;
            if (rows % dp)
              continue;
            // Generation decodes a dp rank's rows at once, or, where their
            // KV cache does not fit, in the fewest waves that do (fewer,
            // larger waves read the weights fewer times).
            // A pipeline wants at least pp micro-batches: the smallest counts
            // of at least pp, 2pp and 4pp that split the rows evenly.
            // Long sequences may fit only one to a micro-batch.
            auto strategy = [&](int64_t mbs) {
              cost::Strategy s;
              s.firstGpu = first;
              s.dp = dp;
              s.sp = sp;
              s.tp = tp;
              s.pp = pp;
              s.microBatches = mbs;
              return s;
            };
            std::vector<int64_t> mbsChoices;
            if (gen) // none fits: reported as not fitting at mbs 1
              mbsChoices = {std::max<int64_t>(
                  1, cost::fewestWaves(arch, p.hw, strategy(1), c.shape,
                                       p.memoryLimit))};
            else if (pp == 1 && c.shape.seqLen >= kMinSpTokens && rows / dp > 4)
              mbsChoices = {1, 4, rows / dp};
            else if (pp == 1)
              mbsChoices = {1, 4};
            else
              for (int64_t want : {pp, 2 * pp, 4 * pp})
                if (int64_t m = divisorAtLeast(rows / dp, want);
                    m > 0 && !llvm::is_contained(mbsChoices, m))
                  mbsChoices.push_back(m);
            for (int64_t mbs : mbsChoices) {
              if ((rows / dp) % mbs)
                continue;
              cost::Strategy s = strategy(mbs);
              Candidate cand = price(s);
              bool fits = cand.mem.total() <= p.memoryLimit;
              if (fits)
                here.push_back(cand);
              const bool train = c.shape.kind == cost::CallKind::Train;
              // ZeRO is a choice, not only a saver: slicing the optimizer
              // step over dp can repay its exposed all-gather.
              if (train && dp * sp >= 2) {
                cost::Strategy t = s;
                t.zero = true;
                if (Candidate k = price(t); k.mem.total() <= p.memoryLimit)
                  here.push_back(k);
              }
              if (train && (!fits || opts.trainSavers))
                for (auto [zero, recompute] :
                     {std::pair(false, true), std::pair(true, true)}) {
                  if (zero && dp * sp < 2)
                    continue;
                  cost::Strategy t = s;
                  t.zero = zero;
                  t.recompute = recompute;
                  if (Candidate k = price(t); k.mem.total() <= p.memoryLimit)
                    savers.push_back(k);
                }
            }
          }
      }
      // Keep every strategy on the whole cluster (the baselines pick there by
      // rule); elsewhere the fastest few per mesh.
      const bool wholeCluster = size == p.gpus; // clang 14: no binding captures
      // A strategy and its ZeRO twin count once, so that the twins do not
      // crowd out other splits (whose layouts may match other calls').
      auto twins = [](const cost::Strategy &a, const cost::Strategy &b) {
        return a.dp == b.dp && a.sp == b.sp && a.tp == b.tp && a.pp == b.pp &&
               a.microBatches == b.microBatches && a.recompute == b.recompute;
      };
      auto fastestFew = [&](std::vector<Candidate> &v) {
        std::stable_sort(v.begin(), v.end(),
                         [](const Candidate &a, const Candidate &b) {
                           return a.time < b.time;
                         });
        if (wholeCluster)
          return;
        std::vector<Candidate> kept;
        int splits = 0;
        for (Candidate &k : v) {
          bool twin = llvm::any_of(
              kept, [&](const Candidate &o) { return twins(o.s, k.s); });
          if (!twin && splits == opts.maxCandidatesPerMesh)
            continue;
          splits += !twin;
          kept.push_back(std::move(k));
        }
        v = std::move(kept);
      };
      fitting[ci].insert(fitting[ci].end(), here.begin(), here.end());
      fastestFew(here);
      fastestFew(savers);
      std::vector<Candidate> &to = opts.trainSavers ? here : saving;
      to.insert(to.end(), savers.begin(), savers.end());
      // Offloading trades a copy from host memory for the resting weights:
      // offer it for the smallest working set per mesh.
      if (opts.offload && p.models[c.model].offloadable && !here.empty()) {
        auto least =
            std::min_element(here.begin(), here.end(),
                             [](const Candidate &a, const Candidate &b) {
                               return a.mem.total() < b.mem.total();
                             });
        cost::Strategy s = least->s;
        s.offload = true;
        here.push_back(price(s));
      }
      p.cands[ci].insert(p.cands[ci].end(), here.begin(), here.end());
    }
    if (p.cands[ci].empty())
      p.cands[ci] = std::move(saving);
    if (p.cands[ci].empty())
      return int(ci);
  }
  return -1;
}

InFlightDiagnostic plan::emitCallError(Operation *call) {
  InFlightDiagnostic d = call->emitError();
  auto file = [](Location l) {
    auto f = dyn_cast<FileLineColLoc>(l);
    return f ? f.getFilename().strref() : llvm::StringRef();
  };
  if (auto alg = call->getParentOfType<r::AlgorithmOp>())
    if (!file(call->getLoc()).empty() && !file(alg.getLoc()).empty() &&
        file(call->getLoc()) != file(alg.getLoc()))
      d.attachNote(alg.getLoc())
          << "in the run of '" << alg.getSymName() << "' here";
  return d;
}

FailureOr<Problem> plan::buildProblem(r::AlgorithmOp alg,
                                      const cost::Calibration &cal,
                                      const ProblemOptions &opts) {
  Problem p;
  auto module = alg->getParentOfType<ModuleOp>();
  SymbolTable symbols(module);
  auto cluster = alg.getClusterOp();
  if (!cluster)
    return alg.emitError("algorithm has no cluster");
  p.hw = cost::hardwareOf(cluster, cal);
  p.gpus = cluster.getNumGpus();
  p.nodes = cluster.getNodes();
  p.memoryLimit = cost::kUsableHbmFraction * p.hw.hbmBytes;
  p.staleness = alg.getStaleness();

  llvm::StringMap<int> modelIndex;
  llvm::DenseMap<Operation *, int> callIndex;
  // The call that produced `v`, looking through rlhf.field and transfers.
  auto producer = [&](Value v) -> int {
    Operation *def = v.getDefiningOp();
    while (def && isa<r::FieldOp, r::TransferOp>(def))
      def = def->getOperand(0).getDefiningOp();
    auto it = def ? callIndex.find(def) : callIndex.end();
    return it == callIndex.end() ? -1 : it->second;
  };

  auto modelOf = [&](StringRef name) {
    auto model = symbols.lookup<r::ModelOp>(name);
    auto [it, inserted] = modelIndex.try_emplace(name, int(p.models.size()));
    if (inserted)
      p.models.push_back(
          {name.str(), cost::archOf(model), model.getTrainable()});
    return it->second;
  };
  for (Operation &op : alg.getBodyBlock()) {
    if (auto ema = dyn_cast<r::EmaOp>(op)) {
      p.averages.push_back(
          {&op, modelOf(ema.getTarget()), modelOf(ema.getSource()),
           p.calls.size(),
           ("ema @" + ema.getTarget() + " from @" + ema.getSource()).str()});
      continue;
    }
    if (!r::isModelCall(&op) && !isa<r::ComputeOp, r::FilterGroupsOp>(op))
      continue;
    Call c;
    c.op = &op;
    for (Value v : op.getOperands())
      if (int d = producer(v); d >= 0) {
        c.deps.push_back({d, tensorBytes(v.getType())});
        Value read = v;
        while (auto t = read.getDefiningOp<r::TransferOp>())
          read = t.getInput();
        c.depValues.push_back(read.getAsOpaquePointer());
      }
    if (isa<r::FilterGroupsOp>(op)) {
      // Keeping rows is a copy on the controller; the rounds it asks for are
      // priced on the calls it repeats.
      c.host = true;
      c.label = "filter_groups";
    } else if (auto comp = dyn_cast<r::ComputeOp>(op)) {
      c.host = true;
      c.hostTime = cost::estimateHost(comp).time;
      c.label = ("compute " + (comp.getFnAttr()
                                   ? comp.getFnAttr().getValue()
                                   : r::stringifyComputeKind(comp.getKind())))
                    .str();
    } else {
      auto ref = op.getAttrOfType<FlatSymbolRefAttr>("model");
      auto model = symbols.lookup<r::ModelOp>(ref.getValue());
      c.model = modelOf(ref.getValue());
      c.shape = cost::shapeOf(&op, model);
      c.pinned = cost::strategyOf(&op);
      if (auto gen = dyn_cast<r::GenerateOp>(op); gen && model.getTrainable())
        c.stale = gen.getStaleness();
      for (Value v : op.getResults())
        if (auto rec = dyn_cast<r::RecordType>(v.getType()))
          for (Type t : rec.getTypes())
            c.outBytes += tensorBytes(t);
      c.label = (op.getName().stripDialect() + " @" + ref.getValue()).str();
    }
    callIndex[&op] = int(p.calls.size());
    p.calls.push_back(std::move(c));
  }
  std::vector<char> averaged(p.models.size(), 0);
  for (const Average &e : p.averages)
    averaged[e.target] = averaged[e.source] = 1;
  std::vector<int> callsOf(p.models.size(), 0);
  for (const Call &c : p.calls)
    if (!c.host)
      ++callsOf[c.model];
  p.parked.resize(p.models.size());
  for (size_t m = 0; m < p.models.size(); ++m)
    if (callsOf[m] == 0) {
      cost::CallShape shape;
      shape.seqLen = 1;
      p.parked[m] =
          Candidate::priced(p.models[m].arch, p.hw, cost::Strategy{}, shape);
    }
  for (size_t m = 0; m < p.models.size(); ++m)
    p.models[m].offloadable = !p.models[m].trainable && callsOf[m] == 1 &&
                              p.hw.hostBw > 0 && !averaged[m];

  // Above 16 nodes the search plans a copy scaled down to at most 16 nodes
  // (Hierarchy.cpp): about 4 s on one core for four 70B models on 512 nodes.
  // The cap is the largest cluster measured; the plan's pricing still walks
  // every GPU (a reallocation estimate between two 4096-GPU layouts takes
  // 8 ms, and inserting the plan's reallocations 1.4 s), which grows with
  // the square of the cluster. Larger clusters are planned by hand.
  constexpr int64_t kMaxPlannedNodes = 512;
  bool anyFree =
      llvm::any_of(p.calls, [](const Call &c) { return !c.host && !c.pinned; });
  if (anyFree && p.nodes > kMaxPlannedNodes)
    return cluster.emitError()
           << "the planner searches clusters of at most " << kMaxPlannedNodes
           << " nodes, and '" << cluster.getSymName() << "' has " << p.nodes
           << "; plan on at most " << kMaxPlannedNodes
           << " nodes, or pin every model call with @place(...) and compile "
              "with --planner=manual";
  p.cands.resize(p.calls.size());
  for (size_t ci = 0; ci < p.calls.size(); ++ci) {
    const Call &c = p.calls[ci];
    if (c.host || !c.pinned)
      continue;
    if (c.pinned->offload && !(p.hw.hostBw > 0))
      return emitCallError(c.op)
             << "'" << c.label << "' is offloaded, but hardware '" << p.hw.name
             << "' declares no host_bandwidth; add one or drop the offload";
    p.cands[ci].push_back(
        Candidate::priced(p.models[c.model].arch, p.hw, *c.pinned, c.shape));
  }
  if (!anyFree)
    return p;
  // Every strategy that fits, before the per-mesh cut (see shareLayouts).
  std::vector<std::vector<Candidate>> fitting(p.calls.size());
  int none = p.nodes > plan::detail::kDirectNodes
                 ? plan::detail::addLargeClusterCandidates(p, opts, fitting)
                 : plan::detail::addCandidates(
                       p, opts,
                       plan::detail::meshes(p.nodes, p.hw.gpusPerNode,
                                            opts.halfNodeMeshes),
                       fitting);
  if (none >= 0) {
    const Call &c = p.calls[none];
    return emitCallError(c.op)
           << "no placement of '" << c.label << "' fits in the "
           << llvm::formatv("{0:f1}", p.memoryLimit / 1e9)
           << " GB available per " << p.hw.name
           << " (90% of its HBM) on this cluster"
           << (c.shape.kind == cost::CallKind::Train
                   ? ", even sharding optimizer state and recomputing "
                     "activations"
                   : "")
           << (c.shape.kind == cost::CallKind::Generate
                   ? "; use more GPUs (tensor parallelism shards the "
                     "weights and the KV cache), fewer sequences (batch or "
                     "n), fewer max_new_tokens, or a smaller model"
               : c.shape.kind == cost::CallKind::Inference
                   ? "; use more GPUs, more micro-batches (@place(..., mbs "
                     "= M)), or a smaller model"
                   : "; use more GPUs, more minibatches, or a smaller "
                     "model");
  }
  plan::detail::shareLayouts(p, fitting);
  return p;
}
