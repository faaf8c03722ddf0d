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

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace rlhfc::plan {

struct Candidate {
  cost::Strategy s;
  int64_t devices = 0;
  double time = 0;
  cost::Memory mem;
};

struct Model {
  std::string name;
  cost::Arch arch;
  bool trainable = false;
};

struct Call {
  mlir::Operation *op = nullptr; ///< null for host compute
  std::string label;             ///< "generate @actor"
  bool host = false;
  int model = -1;
  cost::CallShape shape;
  /// Producers this call reads from, with the bytes it reads.
  std::vector<std::pair<int, double>> deps;
  std::optional<cost::Strategy> pinned;
};

struct Problem {
  cost::Hardware hw;
  int64_t gpus = 0, nodes = 0;
  std::vector<Model> models;
  std::vector<Call> calls;
  std::vector<std::vector<Candidate>> cands; ///< per call (empty for host)
  double memoryLimit = 0; ///< usable bytes per GPU

  /// Cached reallocation time of `model` between two layouts.
  double reallocTime(int model, const cost::Strategy &from,
                     const cost::Strategy &to) const;

private:
  mutable std::unordered_map<std::string, double> reallocCache;
};

struct ProblemOptions {
  int maxCandidatesPerMesh = 3; ///< fastest strategies kept per mesh
  bool wideMeshes = true; ///< also non-power-of-two whole-node counts
};

/// Reads the calls of `alg` and enumerates their candidates. Calls with a
/// mesh and strategy already set are pinned to them. Fails (with a located
/// error) when a call has no candidate that fits in memory.
mlir::FailureOr<Problem> buildProblem(mlir::rlhf::AlgorithmOp alg,
                                      const cost::Calibration &cal,
                                      const ProblemOptions &opts = {});

/// Index of the chosen candidate for every call (-1 for host calls).
using Assignment = std::vector<int>;

struct Event {
  enum Kind { Call, Realloc, Transfer } kind;
  int call = -1;   ///< the call this event serves
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

SimResult simulate(const Problem &p, const Assignment &a, int iterations = 3,
                   bool record = false);

enum class Method { Search, Heuristic, Colocated, Separated, Manual };
std::optional<Method> parseMethod(llvm::StringRef name);

struct SearchOptions {
  int64_t budget = 200000; ///< simulated assignments for annealing
  uint64_t seed = 1;
  int64_t exhaustiveLimit = 100000; ///< enumerate fully below this size
};

struct SearchStats {
  bool exhaustive = false;
  int64_t evaluated = 0;
  double bestTime = 0;
};

/// The heuristic, colocated and separated baselines, or the search.
/// Returns nullopt when the method finds no assignment that fits.
std::optional<Assignment> solve(const Problem &p, Method m,
                                const SearchOptions &opts = {},
                                SearchStats *stats = nullptr);

/// Applies an assignment: sets mesh and strategy on every unpinned call.
void apply(const Problem &p, const Assignment &a);

} // namespace rlhfc::plan

#endif // RLHFC_PLANNER_PLANNER_H
