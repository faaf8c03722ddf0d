//===- BenchSupport.cpp - setup shared by the planner benchmarks ----------===//

#include "BenchSupport.h"

#include "rlhfc/Frontend/Frontend.h"
#include "rlhfc/Frontend/MLIRGen.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace rlhfc;
using llvm::formatv;

mlir::OwningOpRef<mlir::ModuleOp> bench::lower(mlir::MLIRContext &ctx,
                                               const std::string &text) {
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "bench.rlhf"), llvm::SMLoc());
  FrontendOptions opts;
  opts.stdlibDir = RLHF_STDLIB_DIR;
  auto prog = loadProgram(sm, ctx, opts);
  if (!prog)
    return nullptr;
  return mlirGen(*prog, ctx);
}

double bench::secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

bool bench::loadCalibrationFile(const std::string &path, llvm::StringRef tool,
                                cost::Calibration &out) {
  if (path.empty())
    return true;
  auto loaded = cost::loadCalibration(path);
  if (!loaded) {
    llvm::errs() << tool << ": error: " << llvm::toString(loaded.takeError())
                 << "\n";
    return false;
  }
  out = std::move(*loaded);
  return true;
}

void bench::printPlan(const plan::Problem &p, const plan::Assignment &a,
                      llvm::StringRef what) {
  llvm::errs() << formatv("  {0}: {1:f3}s\n", what,
                          plan::simulate(p, a).iterationTime);
  for (size_t c = 0; c < p.calls.size(); ++c)
    if (!p.calls[c].host) {
      const plan::Candidate &k = p.cands[c][a[c]];
      std::string extra;
      if (k.s.sp > 1)
        extra += formatv(" sp{0}", k.s.sp).str();
      if (k.s.zero)
        extra += " zero";
      if (k.s.recompute)
        extra += " recompute";
      if (k.s.offload)
        extra += " offload";
      llvm::errs() << formatv(
          "    {0,-22} [{1}:{2}] dp{3} tp{4} pp{5} mbs{6}"
          "{7} {8:f3}s {9:f1}GB\n",
          p.calls[c].label, k.s.firstGpu, k.s.firstGpu + k.devices, k.s.dp,
          k.s.tp, k.s.pp, k.s.microBatches, extra, k.time, k.mem.total() / 1e9);
    }
}
