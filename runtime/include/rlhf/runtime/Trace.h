//===- Trace.h - the measured timeline of a run -----------------*- C++ -*-===//
//
// What each rank actually ran, step by step, as a Chrome trace (the format of
// `rlhfc --emit=trace`, so the measured and the predicted timeline open side
// by side in Perfetto), with each rank's resident memory (RSS) as a counter.
// Ranks take their clocks' zero at a barrier, so spans
// of different ranks line up to within that barrier's skew.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_TRACE_H
#define RLHF_RUNTIME_TRACE_H

#include "rlhf/runtime/Communicator.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

namespace rlhf {

class MeasuredTrace {
public:
  using Clock = std::chrono::steady_clock;

  /// Every rank makes one; rank 0 writes `path`. Call right after a barrier.
  MeasuredTrace(std::string path, const Communicator &world,
                const std::string &program, double predictedIteration);

  /// One span of this rank: `cat` is call, realloc, transfer, load or host;
  /// `name`, the metric's label ("train actor"), is drawn as the plan names
  /// the call ("train_step @actor").
  /// `peakBytes`, the allocator's peak during it (SpanPeaks: what the plan
  /// predicts of a GPU), is drawn as a counter per rank beside the predicted
  /// trace's memory per GPU; the process's resident memory at `end` goes in
  /// the span's arguments.
  void add(const std::string &name, const char *cat, Clock::time_point start,
           Clock::time_point end, int64_t step, double peakBytes);

  /// Collective: gathers every rank's spans since the last flush, and rank
  /// 0 appends them to the file, which is whole JSON after every flush: a
  /// run that dies keeps the trace of every finished step.
  void flush(Communicator &world);

private:
  void append(const std::vector<nlohmann::json> &events);

  std::string path;
  Clock::time_point epoch;
  nlohmann::json pending = nlohmann::json::array(); ///< this rank's, unsent
  std::fstream file;                                ///< rank 0
  std::streampos tail = 0; ///< where the closing brackets start
  std::string closing;     ///< "],...}" after the events
};

} // namespace rlhf

#endif // RLHF_RUNTIME_TRACE_H
