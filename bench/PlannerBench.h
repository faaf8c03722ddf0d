//===- PlannerBench.h - what the planner bench's files share -*- C++ -*-===//

#ifndef RLHFC_BENCH_PLANNERBENCH_H
#define RLHFC_BENCH_PLANNERBENCH_H

#include "rlhfc/CostModel/FromIR.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>

namespace rlhfc::bench {

/// PPO with LLaMA-2 `actor`B and `critic`B (reference and reward alike) on
/// `gpus` H100s in nodes of 8, `gen` new tokens, `batch` prompts of 128.
std::string program(int actor, int critic, int gpus, int gen, int batch);

/// Marks `alg` asynchronous: staleness k, and every generate of a trained
/// model may lag k versions (what `staleness = k;` in a run block lowers
/// to, without the frontend's check of the losses, which the planner does
/// not read).
void makeAsync(mlir::rlhf::AlgorithmOp alg, int64_t k);

/// --scale: the search's wall time for 4 x 70B PPO per node count (8 to
/// 512 when `nodes` is empty), PlannerScaleBench.cpp.
int scaleBench(const cost::Calibration &cal, llvm::ArrayRef<int> nodes,
               int64_t budget);

/// --scale --async: the same programs under staleness 1 beside the
/// synchronous search.
int scaleAsyncBench(const cost::Calibration &cal, llvm::ArrayRef<int> nodes,
                    int64_t budget);

} // namespace rlhfc::bench

#endif // RLHFC_BENCH_PLANNERBENCH_H
