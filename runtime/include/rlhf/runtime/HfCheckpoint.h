//===- HfCheckpoint.h - Hugging Face checkpoint directories -----*- C++ -*-===//
//
// A model directory as transformers' save_pretrained writes it: config.json
// and the weights in model.safetensors, or in shards named by
// model.safetensors.index.json. Loading checks every tensor the decoder
// expects (name and shape) and names the first that is missing or wrong;
// F32, F16 and BF16 files load as fp32. Saving writes the same layout, so
// transformers and vLLM load what rlhfc trained.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_HFCHECKPOINT_H
#define RLHF_RUNTIME_HFCHECKPOINT_H

#include "rlhf/runtime/HfConfig.h"
#include "rlhf/runtime/Model.h"

#include <string>

namespace rlhf {

/// Whether `path` is a checkpoint directory (holds config.json).
bool isHfCheckpoint(const std::string &path);

/// The whole (unsharded) weights of `dir` for a decoder of `shape`, fp32.
/// Throws rlhf::Error naming the file and the first tensor that is missing
/// or mis-shaped. Tensors the decoder does not use (rotary caches, a tied
/// lm_head) are ignored.
ParamMap loadHfWeights(const std::string &dir, const ModelShape &shape);

/// Writes config.json (from `arch`) and `full`'s tensors in shards of at
/// most `maxShardBytes` (model.safetensors when one suffices, else
/// model-0000k-of-0000n.safetensors and the index), bf16 when `bf16`.
/// Copies tokenizer files from `tokenizerDir` when it is not empty.
void saveHfCheckpoint(const std::string &dir, const HfArch &arch,
                      const ParamMap &full, int64_t maxShardBytes, bool bf16,
                      const std::string &tokenizerDir = "");

} // namespace rlhf

#endif // RLHF_RUNTIME_HFCHECKPOINT_H
