//===- RLHFAttrs.cpp - rlhf attributes ------------------------------------===//

#include "rlhf/IR/RLHFDialect.h"
#include "rlhf/IR/RLHFOps.h"

#include "rlhf/runtime/LrScheduleNames.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::rlhf;

#include "rlhf/IR/RLHFEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "rlhf/IR/RLHFAttrs.cpp.inc"

void RLHFDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "rlhf/IR/RLHFAttrs.cpp.inc"
      >();
}

LogicalResult ArchAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               StringRef name, int64_t layers, int64_t hidden,
                               int64_t heads, int64_t kvHeads, int64_t ffn,
                               int64_t vocab, int64_t maxSeq, bool, bool,
                               APFloat ropeTheta, APFloat normEps,
                               APFloat ropeFactor, APFloat lowFreq,
                               APFloat highFreq, int64_t originalMaxSeq) {
  // Sema's bounds: the cost model and the reallocation plans walk layers
  // and slices, and token counts multiply.
  for (auto [what, v, hi] :
       {std::tuple("layers", layers, kMaxLayers),
        std::tuple("hidden", hidden, kMaxHidden),
        std::tuple("heads", heads, kMaxHeads),
        std::tuple("kv_heads", kvHeads, kMaxHeads),
        std::tuple("ffn", ffn, kMaxFfn), std::tuple("vocab", vocab, kMaxVocab),
        std::tuple("max_seq", maxSeq, kMaxSeqLen)})
    if (v <= 0 || v > hi)
      return emitError() << "architecture " << what << " is " << v
                         << "; it must be 1 to " << hi;
  if (hidden % heads)
    return emitError() << "hidden size " << hidden << " is not divisible by "
                       << heads << " heads";
  if (heads % kvHeads)
    return emitError() << heads << " heads are not divisible by " << kvHeads
                       << " kv_heads";
  if (!(ropeTheta.convertToDouble() > 0) || !(normEps.convertToDouble() > 0))
    return emitError() << "rope_theta and norm_eps must be positive";
  if (!(ropeFactor.convertToDouble() >= 0))
    return emitError() << "rope_factor must be positive, or 0 for no scaling";
  if (ropeFactor.convertToDouble() > 0 &&
      (!(highFreq.convertToDouble() > lowFreq.convertToDouble()) ||
       !(lowFreq.convertToDouble() > 0) || originalMaxSeq <= 0))
    return emitError() << "rope scaling needs 0 < rope_low_freq_factor < "
                          "rope_high_freq_factor and a positive "
                          "rope_original_max_seq";
  return success();
}

::rlhf::ModelShape ArchAttr::getShape(bool valueHead) const {
  ::rlhf::ModelShape s{getLayers(),        getHidden(), getHeads(),
                       getKvHeads(),       getFfn(),    getVocab(),
                       getTieEmbeddings(), valueHead};
  s.qkvBias = getQkvBias();
  return s;
}

int64_t ArchAttr::getParamCount(bool valueHead) const {
  return ::rlhf::parameterCount(getShape(valueHead));
}

LogicalResult HardwareAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   StringRef name, APFloat flops, APFloat hbm,
                                   APFloat hbmBw, APFloat nvlinkBw,
                                   APFloat networkBw, APFloat hostBw) {
  // Infinite rates price every call at 0 s and every GPU as never full.
  for (const APFloat &v : {flops, hbm, hbmBw, nvlinkBw, networkBw})
    if (!(v.convertToDouble() > 0) || v.isInfinity())
      return emitError() << "hardware rates and sizes must be positive and "
                            "finite";
  if (!(hostBw.convertToDouble() >= 0) || hostBw.isInfinity())
    return emitError() << "host_bandwidth must be positive and finite, or 0 "
                          "when unknown";
  return success();
}

LogicalResult
OptimizerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      StringRef kind, APFloat lr, APFloat beta1, APFloat beta2,
                      APFloat eps, APFloat weightDecay, APFloat gradClip,
                      StringRef schedule, int64_t warmupSteps,
                      int64_t decaySteps, APFloat minLr) {
  if (kind != "adam" && kind != "adamw")
    return emitError() << "unknown optimizer '" << kind
                       << "'; supported: adam, adamw";
  for (const APFloat &v : {lr, beta1, beta2, eps, weightDecay, gradClip, minLr})
    if (!(v.convertToDouble() >= 0) || v.isInfinity())
      return emitError() << "optimizer settings must be non-negative and "
                            "finite";
  if (!(beta1.convertToDouble() < 1) || !(beta2.convertToDouble() < 1))
    return emitError() << "beta1 and beta2 must be below 1";
  if (!llvm::is_contained(::rlhf::kLrScheduleNames, schedule)) {
    InFlightDiagnostic d = emitError() << "unknown schedule '" << schedule
                                       << "'; supported: ";
    llvm::interleaveComma(::rlhf::kLrScheduleNames, d);
    return d;
  }
  if (warmupSteps < 0 || decaySteps < 0 || warmupSteps > kMaxSteps ||
      decaySteps > kMaxSteps)
    return emitError() << "warmup_steps and decay_steps must be between 0 and "
                       << kMaxSteps;
  if (minLr.convertToDouble() > lr.convertToDouble())
    return emitError() << "min_lr must not exceed lr";
  return success();
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t first, int64_t size) {
  if (first < 0 || size <= 0 || first > kMaxGpus || size > kMaxGpus)
    return emitError() << "a mesh needs 0 <= first <= " << kMaxGpus
                       << " and 0 < size <= " << kMaxGpus << ", got <" << first
                       << ", " << size << ">";
  return success();
}

LogicalResult StrategyAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t dp, int64_t tp, int64_t pp,
                                   int64_t mbs, bool, bool, bool, int64_t sp) {
  if (dp <= 0 || tp <= 0 || pp <= 0 || mbs <= 0 || sp <= 0)
    return emitError() << "dp, tp, pp, mbs and sp must be positive";
  // Multiplied step by step, each partial product bounded: no overflow.
  int64_t devices = 1;
  for (int64_t d : {dp, tp, pp, sp}) {
    if (d > kMaxGpus / devices)
      return emitError() << "dp*tp*pp*sp exceeds the " << kMaxGpus
                         << " GPUs a cluster may have";
    devices *= d;
  }
  if (mbs > kMaxPlaceDegree)
    return emitError() << "mbs is " << mbs << "; it must be 1 to "
                       << kMaxPlaceDegree;
  return success();
}
