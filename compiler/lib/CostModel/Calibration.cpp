//===- Calibration.cpp - efficiency factors and calibration files ---------===//

#include "rlhfc/CostModel/CostModel.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <limits>

using namespace rlhfc::cost;

Efficiency rlhfc::cost::defaultEfficiency(llvm::StringRef name) {
  Efficiency e;
  // Fitted to the published measurements in docs/validation/published.csv;
  // docs/cost-model.md lists the fit and its errors.
  if (name.starts_with("A100") || name.starts_with("A800")) {
    e.matmul = 0.68;
    // FlashAttention-2 reaches 50-73% of peak on an A100 (arXiv 2307.08691,
    // abstract); causal attention sits at the low end.
    e.attention = 0.50;
    e.hbm = 0.85;
    e.nvlink = 0.78;
    e.network = 0.90;
    e.gemmFill = 1.2e6 * 108 / 132; // 108 SMs to the H100's 132
  } else if (name.starts_with("H100") || name.starts_with("H800") ||
             name.starts_with("H200")) {
    e.matmul = 0.64;
    // FlashAttention-2, causal, head dim 128, 8K-16K tokens: 333-335
    // TFLOP/s (arXiv 2407.08608, Fig. 5; docs/validation/published.csv).
    e.attention = 0.34;
    e.hbm = 0.80;
    e.nvlink = 0.80;
    e.network = 0.90;
    e.nvls = 1.06; // NVLink SHARP: ~480 GB/s all-reduce bus bandwidth
  }
  return e;
}

std::optional<Hardware> rlhfc::cost::knownHardware(llvm::StringRef name) {
  Hardware hw;
  hw.name = name.str();
  if (name == "A100_40GB" || name == "A100_80GB") {
    hw.flops = 312e12;
    bool small = name == "A100_40GB";
    hw.hbmBytes = small ? 40e9 : 80e9;
    hw.hbmBw = small ? 1555e9 : 2039e9;
    hw.nvlinkBw = 300e9;
    hw.networkBw = 25e9;
    hw.hostBw = 32e9; // PCIe Gen4 x16, one direction
  } else if (name == "H100_SXM" || name == "H200") {
    hw.flops = 989e12;
    bool h200 = name == "H200";
    hw.hbmBytes = h200 ? 141e9 : 80e9;
    hw.hbmBw = h200 ? 4.8e12 : 3.35e12;
    hw.nvlinkBw = 450e9;
    hw.networkBw = 50e9;
    hw.hostBw = 64e9; // PCIe Gen5 x16, one direction
  } else {
    return std::nullopt;
  }
  hw.gpusPerNode = 8;
  hw.eff = defaultEfficiency(name);
  return hw;
}

llvm::Expected<Calibration> rlhfc::cost::loadCalibration(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return llvm::createStringError(buf.getError(), "cannot read calibration file %s",
                                   path.str().c_str());
  auto json = llvm::json::parse((*buf)->getBuffer());
  if (!json)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "%s: %s", path.str().c_str(),
                                   llvm::toString(json.takeError()).c_str());
  auto *obj = json->getAsObject();
  if (!obj)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "%s: expected a JSON object mapping hardware "
                                   "names to efficiency factors",
                                   path.str().c_str());
  std::map<std::string, Efficiency> out;
  for (auto &[hwName, value] : *obj) {
    auto *fields = value.getAsObject();
    if (!fields)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "%s: '%s' must be an object", path.str().c_str(),
                                     hwName.str().c_str());
    Efficiency e = defaultEfficiency(hwName);
    for (auto &[key, v] : *fields) {
      std::optional<double> d = v.getAsNumber();
      double *dst = key == "matmul"            ? &e.matmul
                    : key == "attention"       ? &e.attention
                    : key == "hbm"             ? &e.hbm
                    : key == "nvlink"          ? &e.nvlink
                    : key == "nvls"            ? &e.nvls
                    : key == "network"         ? &e.network
                    : key == "nvlink_latency"  ? &e.nvlinkLatency
                    : key == "network_latency" ? &e.networkLatency
                    : key == "dp_overlap"      ? &e.dpOverlap
                    : key == "kernel_overhead" ? &e.kernelOverhead
                    : key == "gemm_fill"       ? &e.gemmFill
                    : key == "gemm_depth"      ? &e.gemmDepth
                    : key == "host"            ? &e.host
                                               : nullptr;
      if (!dst)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "%s: unknown factor '%s' for '%s'; known: matmul, attention, hbm, "
            "nvlink, nvls, network, nvlink_latency, network_latency, "
            "dp_overlap, kernel_overhead, gemm_fill, gemm_depth, host",
            path.str().c_str(), key.str().c_str(), hwName.str().c_str());
      // Efficiencies are fractions of a peak: above 0 (a zero prices a call
      // at infinite time) and at most 1. NVLS is a factor on the link's
      // bandwidth that may exceed 1 (0: none); dp_overlap a fraction that may
      // be 0; latencies and the per-kernel time are seconds; gemm_fill and
      // gemm_depth are sizes.
      const bool fraction = dst == &e.matmul || dst == &e.attention ||
                            dst == &e.hbm || dst == &e.nvlink ||
                            dst == &e.network || dst == &e.host;
      const bool positive =
          fraction || dst == &e.gemmFill || dst == &e.gemmDepth;
      const char *want = fraction ? "a fraction of the peak in (0, 1]"
                         : dst == &e.dpOverlap ? "a fraction in [0, 1]"
                         : positive            ? "a positive number"
                                               : "a non-negative number";
      const double hi = fraction || dst == &e.dpOverlap
                            ? 1.0
                            : std::numeric_limits<double>::infinity();
      if (!d || !std::isfinite(*d) || *d < 0 || (positive && *d == 0) ||
          *d > hi)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(), "%s: '%s.%s' must be %s, got %s",
            path.str().c_str(), hwName.str().c_str(), key.str().c_str(), want,
            d ? llvm::formatv("{0}", *d).str().c_str() : "not a number");
      *dst = *d;
    }
    out[hwName.str()] = e;
  }
  return out;
}
