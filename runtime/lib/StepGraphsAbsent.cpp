//===- StepGraphsAbsent.cpp - decode steps of a build without CUDA --------===//

#include "StepGraphs.h"

using namespace rlhf;

struct StepGraphs::Impl {};

StepGraphs::StepGraphs(c10::Device, bool, std::function<bool(bool)>) {}
StepGraphs::~StepGraphs() = default;
void StepGraphs::run(int64_t, const std::function<void()> &step) { step(); }
bool StepGraphs::active() const { return false; }
int64_t StepGraphs::captures() const { return 0; }
