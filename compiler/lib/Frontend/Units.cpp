//===- Units.cpp - unit suffixes of .rlhf numbers -------------------------===//

#include "rlhfc/Frontend/Units.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdio>

using namespace rlhfc;

static const Unit kUnits[] = {
    {"B", 1, UnitDim::Bytes},
    {"KB", 1e3, UnitDim::Bytes},
    {"MB", 1e6, UnitDim::Bytes},
    {"GB", 1e9, UnitDim::Bytes},
    {"TB", 1e12, UnitDim::Bytes},
    {"KiB", 1024.0, UnitDim::Bytes},
    {"MiB", 1024.0 * 1024, UnitDim::Bytes},
    {"GiB", 1024.0 * 1024 * 1024, UnitDim::Bytes},
    {"TiB", 1024.0 * 1024 * 1024 * 1024, UnitDim::Bytes},
    {"MBps", 1e6, UnitDim::Bandwidth},
    {"GBps", 1e9, UnitDim::Bandwidth},
    {"TBps", 1e12, UnitDim::Bandwidth},
    {"Mbps", 1e6 / 8, UnitDim::Bandwidth},
    {"Gbps", 1e9 / 8, UnitDim::Bandwidth},
    {"Tbps", 1e12 / 8, UnitDim::Bandwidth},
    {"GFLOPS", 1e9, UnitDim::Flops},
    {"TFLOPS", 1e12, UnitDim::Flops},
    {"PFLOPS", 1e15, UnitDim::Flops},
    {"s", 1, UnitDim::Seconds},
    {"ms", 1e-3, UnitDim::Seconds},
    {"us", 1e-6, UnitDim::Seconds},
};

llvm::StringRef rlhfc::unitDimName(UnitDim d) {
  switch (d) {
  case UnitDim::None: return "a plain number";
  case UnitDim::Bytes: return "a size in bytes (e.g. 80GB)";
  case UnitDim::Bandwidth: return "a bandwidth (e.g. 450GBps or 400Gbps)";
  case UnitDim::Flops: return "a compute rate (e.g. 989TFLOPS)";
  case UnitDim::Seconds: return "a duration (e.g. 30s)";
  }
  return "?";
}

const Unit *rlhfc::lookupUnit(llvm::StringRef name) {
  auto *it = llvm::find_if(kUnits, [&](const Unit &u) { return name == u.name; });
  return it == std::end(kUnits) ? nullptr : it;
}

std::string rlhfc::knownUnitList() {
  std::string s;
  for (const Unit &u : kUnits)
    s += (s.empty() ? "" : ", ") + std::string(u.name);
  return s;
}

std::string rlhfc::formatNumber(double v) {
  char buf[32];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  else
    std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}
