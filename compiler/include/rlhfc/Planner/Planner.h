//===- Planner.h - placement search over the RLHF dataflow ------*- C++ -*-===//
//
// The planner picks a device mesh and a parallel strategy for every model
// call. It prices candidates with the cost model and scores whole
// assignments with a simulator of several unrolled iterations: calls on
// disjoint meshes overlap, calls sharing GPUs serialise, parameter
// reallocations and batch transfers take time on the GPUs they use, and
// every GPU's memory holds its co-resident models.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_PLANNER_PLANNER_H
#define RLHFC_PLANNER_PLANNER_H

#include "rlhfc/CostModel/FromIR.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace rlhfc::plan {

struct Candidate {
  cost::Strategy s;
  int64_t devices = 0;
  double time = 0; ///< the call's, with `load` included
  double load = 0; ///< of it, the copy from host memory when offloaded
  cost::Memory mem;

  /// `s` priced by the cost model for a call of `shape`.
  static Candidate priced(const cost::Arch &arch, const cost::Hardware &hw,
                          const cost::Strategy &s,
                          const cost::CallShape &shape);
};

/// The GPU ranges a reallocation between two meshes occupies: both meshes,
/// and none of the GPUs between them, since the runtime moves slices point to
/// point. Overlapping or adjacent meshes give one range, disjoint ones two
/// (the second has count 0 otherwise).
struct ReallocSpan {
  std::pair<int64_t, int64_t> ranges[2]; ///< (first GPU, count)
  int64_t devices() const { return ranges[0].second + ranges[1].second; }
};
inline ReallocSpan reallocSpan(const Candidate &from, const Candidate &to) {
  int64_t a0 = from.s.firstGpu, a1 = a0 + from.devices;
  int64_t b0 = to.s.firstGpu, b1 = b0 + to.devices;
  if (a0 > b0) {
    std::swap(a0, b0);
    std::swap(a1, b1);
  }
  if (b0 <= a1)
    return {{{a0, std::max(a1, b1) - a0}, {0, 0}}};
  return {{{a0, a1 - a0}, {b0, b1 - b0}}};
}

struct Model {
  std::string name;
  cost::Arch arch;
  bool trainable = false;
  /// Frozen, one call, in no ema, and the hardware has a host link:
  /// its weights may rest in host memory (candidates with s.offload, when
  /// ProblemOptions::offload).
  bool offloadable = false;
};

struct Call {
  mlir::Operation *op = nullptr; ///< null for host compute
  std::string label;             ///< "generate @actor"
  bool host = false;
  double hostTime = 0; ///< host functions: seconds on the controller
  int model = -1;
  cost::CallShape shape;
  /// Producers this call reads from, with the bytes it reads.
  std::vector<std::pair<int, double>> deps;
  /// Per dep, the value read (before any transfer): calls in one rows
  /// layout that read one value share its transfer, as insert-transfer does.
  std::vector<const void *> depValues;
  std::optional<cost::Strategy> pinned;
  /// A generate of a trained model under staleness k > 0: it may read
  /// weights up to `stale` versions old, from its own copy (SimulateAsync.cpp).
  int64_t stale = 0;
  /// Bytes of the call's result (a generate's record: what waits in flight).
  double outBytes = 0;
};

/// An `ema` statement: after the calls before it in the body, the source's
/// weights are copied into the target's layout and blended into the
/// target's fp32 master weights (runtime rlhf_ema). It waits for both
/// models and holds the GPUs of both layouts while it runs.
/// An ema target keeps fp32 master weights beside its bf16 ones (runtime
/// rlhf_ema: bf16 alone cannot hold a blend of 1 - decay): twice their bytes.
inline double emaMasterBytes(double weights) { return 2 * weights; }

struct Average {
  mlir::Operation *op = nullptr;
  int target = -1, source = -1; ///< models
  size_t before = 0; ///< the index of the first call after it in the body
  std::string label; ///< "ema @ref from @actor"
};

struct Problem {
  cost::Hardware hw;
  int64_t gpus = 0, nodes = 0;
  std::vector<Model> models;
  std::vector<Call> calls;
  std::vector<Average> averages; ///< in body order
  /// Per model, where it rests when no call places it (an ema target kept
  /// for its weights): on GPU 0 as one shard, the runtime's default layout.
  std::vector<std::optional<Candidate>> parked;
  std::vector<std::vector<Candidate>> cands; ///< per call (empty for host)
  double memoryLimit = 0;                    ///< usable bytes per GPU
  /// The algorithm's staleness: 0 is the synchronous dataflow; k > 0 lets
  /// generation run up to k iterations ahead of training.
  int64_t staleness = 0;

  /// Cached reallocation of `model` between two layouts: its time and the
  /// bytes it moves between GPUs.
  const cost::MoveEstimate &reallocMove(int model, const cost::Strategy &from,
                                        const cost::Strategy &to) const;
  double reallocTime(int model, const cost::Strategy &from,
                     const cost::Strategy &to) const {
    return reallocMove(model, from, to).time;
  }

  /// Per call, its fastest candidate's time and its smallest GPU-seconds
  /// (computed on first use; the candidates must not change afterwards).
  double fastestTime(size_t call) const;
  double leastArea(size_t call) const;

  /// Calls that never run at the same time in any schedule, because each
  /// pair lies on one dependency cycle (`serial`), and the calls that run
  /// beside none of them (`apart`). The period holds the serial calls one
  /// after another and the apart calls' GPU-seconds in what is left
  /// (Bounds.cpp). Computed on first use.
  struct Window {
    std::vector<size_t> serial, apart;
  };
  const std::vector<Window> &windows() const;

  /// A copy in which call c keeps only the candidates k with `keep(c, k)`;
  /// `from[c][i]` is the index here of the copy's candidate i. The copy
  /// computes its own per-call indexes and windows.
  Problem restricted(llvm::function_ref<bool(size_t, const Candidate &)> keep,
                     std::vector<std::vector<int>> &from) const;

  /// On clusters above 32 nodes: the same calls on `scale` times fewer
  /// nodes with a `scale`-th of every batch, which the search plans in
  /// place of this problem (Hierarchy.cpp). `fromCoarse[c][k]` is the
  /// candidate of call c here that scales up coarse->cands[c][k] (-1: none).
  std::shared_ptr<const Problem> coarse;
  int64_t scale = 1;
  std::vector<std::vector<int>> fromCoarse;

private:
  void indexCandidates() const;
  mutable std::vector<double> fastest, smallestArea;
  mutable std::optional<std::vector<Window>> windowCache;
  struct LayoutPairHash {
    size_t operator()(const std::array<int64_t, 9> &k) const;
  };
  mutable std::unordered_map<std::array<int64_t, 9>, cost::MoveEstimate,
                             LayoutPairHash>
      reallocCache;
};

struct ProblemOptions {
  /// fastest strategies kept per mesh (a strategy and its ZeRO twin count
  /// once)
  int maxCandidatesPerMesh = 3;
  bool offload = false; ///< offer offloaded candidates for offloadable models
  /// Offer recomputing twins (with and without ZeRO) of train candidates;
  /// those that fit only so are offered anyway to a call that has no other
  /// candidate. ZeRO twins alone are always offered.
  bool trainSavers = false;
  /// Also meshes of whole nodes and a half (1.5, 2.5, ... nodes) that start
  /// on a half-node boundary. Under staleness the generator takes whole nodes
  /// and the other calls share the rest, which whole nodes alone often split
  /// badly (docs/cost-model.md, "How the search finds the split").
  bool halfNodeMeshes = false;
};

/// Reads the calls of `alg` and enumerates their candidates. Calls with a
/// mesh and strategy already set are pinned to them. Fails (with a located
/// error) when a call has no candidate that fits in memory.
/// An error at a call, with a note at the run that planned it where the
/// call comes from another file (an algorithm of the stdlib): the user's
/// file is where to act.
mlir::InFlightDiagnostic emitCallError(mlir::Operation *call);

mlir::FailureOr<Problem> buildProblem(mlir::rlhf::AlgorithmOp alg,
                                      const cost::Calibration &cal,
                                      const ProblemOptions &opts = {});

/// Index of the chosen candidate for every call (-1 for host calls).
using Assignment = std::vector<int>;

struct Event {
  /// Update: the versioned weight copy from a trainer's layout into its
  /// generator's (asynchronous plans only). Average: an `ema`, whose `call`
  /// indexes Problem::averages. Host: a host function on the controller,
  /// on no GPU (devices 0).
  enum Kind { Call, Realloc, Transfer, Load, Update, Average, Host } kind;
  int call = -1; ///< the call this event serves
  int iteration = 0;
  double start = 0, end = 0;
  int64_t firstGpu = 0, devices = 0;
  double bytes = 0;
};

struct SimResult {
  double iterationTime = 0; ///< steady state, seconds
  double makespan = 0;
  std::vector<double> peakMemory; ///< per GPU
  bool oom = false;
  int oomGpu = -1;
  std::vector<Event> events;
  /// Memory timeline per GPU: (time, bytes) steps, when recorded.
  std::vector<std::vector<std::pair<double, double>>> memoryTrace;
};

/// Simulates `iterations` unrolled iterations. The iteration time is the
/// growth of the makespan after the first iteration, floored by the
/// iterationBounds (which the three-iteration transient can understate).
/// With p.staleness > 0 it runs simulateAsync instead.
SimResult simulate(const Problem &p, const Assignment &a, int iterations = 3,
                   bool record = false);

/// The steady state of an asynchronous plan (p.staleness = k > 0): each
/// stale generate keeps its own copy of the weights and runs up to k
/// iterations ahead of its model's training; after each iteration's last
/// trainer call a weight update copies the new version into the
/// generator's layout (SimulateAsync.cpp, docs/cost-model.md).
SimResult simulateAsync(const Problem &p, const Assignment &a, int iterations,
                        bool record);

/// Whether call `c` is a stale generate that keeps its own weights: under
/// staleness, in a layout other than its model's trainer layout.
bool ownsWeightCopy(const Problem &p, const Assignment &a, size_t c);

constexpr double kInfTime = std::numeric_limits<double>::infinity();

/// Steady-state floors of the iteration time that hold for every schedule.
/// `a` may leave free calls unassigned (-1): they count at their fastest
/// candidate, and reallocations and transfers that touch them as free, so
/// the result never exceeds that of any completion.
struct IterationBounds {
  double busiestGpu = 0; ///< the most work (calls, reallocations) on one GPU
  double cycle = 0;      ///< the longest chain from a model's first call to
                         ///< its last, which the next iteration waits for
  double area = 0;       ///< GPU-seconds of all calls over the GPU count
  double window = 0;     ///< the longest Problem::windows() entry
  double max() const { return std::max({busiestGpu, cycle, area, window}); }
};
IterationBounds iterationBounds(const Problem &p, const Assignment &a);

/// A floor of every plan's iteration time, no lower than iterationBounds
/// with every call at its fastest: over one candidate per call, the least
/// largest of the model cycle, the GPU-seconds over the GPU count, the
/// time of calls that must share a GPU and the longest window
/// (Problem::windows), with reallocations, transfers and
/// placement dropped and memory checked summed and averaged (Floor.cpp).
/// Infinite when not even each call's least memory fits; nullopt when the
/// branch-and-bound exceeds `nodeLimit`. `witness` receives the picks.
std::optional<double> relaxedFloor(const Problem &p,
                                   int64_t nodeLimit = 100'000'000,
                                   Assignment *witness = nullptr);

/// A floor under simulate(p, a, iterations).iterationTime for every
/// assignment a of a problem under staleness (FloorAsync.cpp): over one
/// candidate per call, the least largest of a floor of the busiest GPU, the
/// GPU-seconds over the cluster, and the longest chain of waits that the
/// simulator's measured rate spans. The stale generate and its trainer keep
/// their exact meshes, the other calls only which of them they meet or
/// which run of GPUs outside them they lie in. Memory, transfers and
/// reallocations are dropped.
struct AsyncFloor {
  double time = 0;
  /// The stale generate's and its trainer's candidates there (-1: none).
  int generator = -1, trainer = -1;
  double busiest = 0, area = 0, rate = 0; ///< the three terms there
};
/// nullopt when the branch and bound exceeds `nodeLimit`.
std::optional<AsyncFloor> asyncFloor(const Problem &p,
                                     int64_t nodeLimit = 100'000'000,
                                     int iterations = 3);

/// The peak memory that every completion of a partial assignment reaches on
/// some GPU (the models' resting weights, where known, optimizer state and
/// the largest working set); `gpu` receives that GPU.
double memoryLowerBound(const Problem &p, const Assignment &a,
                        int64_t *gpu = nullptr);

struct ExactOptions {
  int64_t nodeLimit = 50'000'000; ///< give up (unproven) beyond this
  double timeLimit = 0;           ///< seconds; 0: no limit
};

struct ExactStats {
  bool proven = false; ///< the whole tree was searched: the result is optimal
  int64_t nodes = 0, leaves = 0;
  double bestTime = kInfTime;
};

/// Branch-and-bound over every free call's candidates, in program order,
/// pruning with iterationBounds and memoryLowerBound. Returns the best
/// assignment found; when `stats.proven`, no assignment is faster.
/// `incumbent`, if given, seeds the upper bound.
std::optional<Assignment> exactSearch(const Problem &p, const ExactOptions &o,
                                      ExactStats &stats,
                                      const Assignment *incumbent = nullptr);

enum class Method { Search, Heuristic, Colocated, Separated, Manual };
std::optional<Method> parseMethod(llvm::StringRef name);

struct SearchOptions {
  int64_t budget = 200000; ///< simulated assignments for annealing
  uint64_t seed = 1;
  int64_t exhaustiveLimit = 100000; ///< enumerate fully below this size
  int64_t polishNodes = 2'000'000;  ///< branch-and-bound nodes after annealing
  /// Called as the search goes: its stage ("annealing", "descent",
  /// "polishing"), the fraction of the annealing budget spent, and the best
  /// predicted iteration time so far (seconds; infinite before one fits).
  std::function<void(llvm::StringRef stage, double done, double best)> progress;
  /// Method::Heuristic only: before deepening a model's pipeline to fit, turn
  /// on its memory savers at the same tp and pp (the fastest candidate with a
  /// smaller footprint: ZeRO, recomputation, more sp or micro-batches), as an
  /// engineer would at long context. Off: ReaLHF's heuristic as published.
  bool heuristicSavers = false;
};

struct SearchStats {
  bool exhaustive = false; ///< proven optimal by the exact search
  int64_t evaluated = 0;
  double bestTime = 0;
};

/// The heuristic, colocated and separated baselines, or the search.
/// Returns nullopt when the method finds no assignment that fits.
std::optional<Assignment> solve(const Problem &p, Method m,
                                const SearchOptions &opts = {},
                                SearchStats *stats = nullptr);

struct Planned {
  Problem problem;
  std::optional<Assignment> assignment; ///< nullopt: nothing fits
};

/// The options planAlgorithm first builds the problem of `alg` with: under
/// staleness, offloaded candidates and half-node meshes; else the defaults.
ProblemOptions problemOptionsFor(mlir::rlhf::AlgorithmOp alg);

/// Builds the problem of `alg` (problemOptionsFor) and solves it with `m`.
/// Offloading a frozen model buys memory and costs a copy per call, so
/// without staleness the search offers it only when no plan fits without it
/// (then on a problem rebuilt with offloaded candidates and the memory
/// savers). Fails, with a located error, where buildProblem does.
mlir::FailureOr<Planned> planAlgorithm(mlir::rlhf::AlgorithmOp alg,
                                       const cost::Calibration &cal, Method m,
                                       const SearchOptions &opts = {},
                                       SearchStats *stats = nullptr);

/// Applies an assignment: sets mesh and strategy on every unpinned call.
void apply(const Problem &p, const Assignment &a);

} // namespace rlhfc::plan

#endif // RLHFC_PLANNER_PLANNER_H
