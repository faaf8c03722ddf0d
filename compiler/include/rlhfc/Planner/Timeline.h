//===- Timeline.h - per-device timelines of a plan --------------*- C++ -*-===//

#ifndef RLHFC_PLANNER_TIMELINE_H
#define RLHFC_PLANNER_TIMELINE_H

#include "rlhfc/Planner/Planner.h"

#include "llvm/Support/raw_ostream.h"

namespace rlhfc::plan {

/// Chrome trace-event JSON (loads in Perfetto and chrome://tracing): one
/// process per node, one thread per GPU, an event per call, reallocation and
/// transfer on every GPU it occupies, and a memory counter per GPU.
void writeChromeTrace(const Problem &p, const SimResult &sim, llvm::StringRef title,
                      llvm::raw_ostream &os);

/// A self-contained HTML page: an SVG Gantt chart with one lane per GPU
/// (calls coloured by model, reallocations and transfers marked), the
/// predicted memory of every GPU over time, and a table of the calls.
void writeTimelineHtml(const Problem &p, const SimResult &sim, llvm::StringRef title,
                       llvm::raw_ostream &os);

} // namespace rlhfc::plan

#endif // RLHFC_PLANNER_TIMELINE_H
