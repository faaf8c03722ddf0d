//===- RLHFAttrs.cpp - rlhf attributes ------------------------------------===//

#include "rlhf/IR/RLHFDialect.h"

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
  if (layers <= 0 || hidden <= 0 || heads <= 0 || kvHeads <= 0 || ffn <= 0 ||
      vocab <= 0 || maxSeq <= 0)
    return emitError() << "architecture sizes must be positive";
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
  for (const APFloat &v : {flops, hbm, hbmBw, nvlinkBw, networkBw})
    if (!(v.convertToDouble() > 0))
      return emitError() << "hardware rates and sizes must be positive";
  if (!(hostBw.convertToDouble() >= 0))
    return emitError() << "host_bandwidth must be positive, or 0 when unknown";
  return success();
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t first, int64_t size) {
  if (first < 0 || size <= 0)
    return emitError() << "a mesh needs first >= 0 and size > 0, got <" << first
                       << ", " << size << ">";
  return success();
}

LogicalResult StrategyAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t dp, int64_t tp, int64_t pp,
                                   int64_t mbs, bool, bool, bool, int64_t sp) {
  if (dp <= 0 || tp <= 0 || pp <= 0 || mbs <= 0 || sp <= 0)
    return emitError() << "dp, tp, pp, mbs and sp must be positive";
  return success();
}
