//===- HfConfig.h - Hugging Face config.json of LLaMA-family models -*- C++
//-*-===//
//
// What rlhfc needs from a checkpoint directory's config.json: the decoder's
// shape and the numbers the model computes with (rope base and scaling, norm
// epsilon). Supports the LLaMA, Mistral and Qwen2 families. Torch-free and
// exception-free: the compiler reads configs at compile time with it, and
// the runtime at load time.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_HFCONFIG_H
#define RLHF_RUNTIME_HFCONFIG_H

#include "rlhf/runtime/ReallocPlan.h"

#include <cstdint>
#include <optional>
#include <string>

namespace rlhf {

/// LLaMA-3's rope_scaling ("rope_type": "llama3"): long wavelengths are
/// divided by `factor`, short ones kept, and the band between smoothed.
struct RopeScaling {
  double factor = 0; ///< 0: no scaling
  double lowFreqFactor = 1, highFreqFactor = 4;
  int64_t originalMaxPositions = 8192;
  bool enabled() const { return factor > 0; }
};

struct HfArch {
  std::string modelType; ///< llama, mistral or qwen2
  ModelShape shape;      ///< qkvBias for Qwen2 and attention_bias
  int64_t maxPositions = 0;
  double ropeTheta = 10000.0;
  double normEps = 1e-6;
  RopeScaling rope;
  int64_t slidingWindow = 0; ///< Mistral v0.1's; 0: none
  /// The config.json text it was read from: an export keeps what rlhfc does
  /// not model (token ids, initializer_range, ...). Empty for a plain arch.
  std::string source;
  /// Token ids written where `source` has none (the run's tokenizer's);
  /// -1: none.
  int64_t bosId = -1, eosId = -1, padId = -1;
};

/// Why reading failed: `key` names the offending key where there is one.
struct HfConfigError {
  std::string message, key;
};

/// Reads `dir`/config.json (or `dir` itself when it names a .json file).
/// Returns nullopt with `error` set for a missing file, malformed JSON, an
/// unsupported model_type (named) or a missing or mistyped key.
std::optional<HfArch> readHfConfig(const std::string &dir,
                                   HfConfigError &error);

/// The config.json of `arch` as transformers writes it for its model_type:
/// `arch.source`'s keys, with the ones rlhfc models set from `arch`, and
/// torch_dtype bfloat16 when `bf16`, else float32.
std::string writeHfConfig(const HfArch &arch, bool bf16 = false);

} // namespace rlhf

#endif // RLHF_RUNTIME_HFCONFIG_H
