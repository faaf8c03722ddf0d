//===- PlanHardware.h - the plan's GPU beside the one that runs -*- C++ -*-===//
//
// A plan prices its cluster's hardware (a preset such as H100_SXM, or the
// program's own `hardware` block). Run on another GPU, its times are not the
// plan's error, and a plan for a larger GPU may not fit: a run says so at its
// start rather than after an out-of-memory error mid-step.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_PLANHARDWARE_H
#define RLHF_RUNTIME_PLANHARDWARE_H

#include <string>

namespace rlhf {

/// A note when GPU `gpu` (the driver's name) is not the plan's hardware
/// `planned`; empty when it is, or when either is unknown.
std::string hardwareNote(const std::string &planned, const std::string &gpu);

/// A warning when the plan puts more than the GPU holds on this rank's GPU;
/// empty when it fits or either size is unknown (0).
std::string memoryWarning(int rank, double plannedBytes, const std::string &gpu,
                          double gpuBytes);

} // namespace rlhf

#endif // RLHF_RUNTIME_PLANHARDWARE_H
