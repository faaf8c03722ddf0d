//===- LrScheduleNames.h - the learning-rate schedules by name -*- C++ -*-===//
//
// One list for the three readers of `schedule = NAME`: Sema (with a
// did-you-mean), the dialect's #rlhf.optimizer verifier and the runtime's
// LrSchedule::parse. Header-only and free of LibTorch, since the compiler
// includes it.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_LRSCHEDULENAMES_H
#define RLHF_RUNTIME_LRSCHEDULENAMES_H

namespace rlhf {

/// In the order of LrSchedule::Kind.
inline constexpr const char *kLrScheduleNames[] = {"constant", "linear",
                                                   "cosine"};

} // namespace rlhf

#endif // RLHF_RUNTIME_LRSCHEDULENAMES_H
