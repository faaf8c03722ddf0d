//===- SafeTensors.h - Hugging Face safetensors files -----------*- C++ -*-===//
//
// The safetensors format: an 8-byte little-endian header length, a JSON
// header mapping tensor names to dtype, shape and byte offsets, then the raw
// data. Loading accepts F32, F16 and BF16 and returns fp32 tensors; every
// malformation is an rlhf::Error naming the file and what is wrong.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_SAFETENSORS_H
#define RLHF_RUNTIME_SAFETENSORS_H

#include "rlhf/runtime/Model.h"

#include <map>
#include <string>

namespace rlhf {

/// The tensors of `path`; its string metadata into `metadata` when given.
ParamMap
loadSafetensors(const std::string &path,
                std::map<std::string, std::string> *metadata = nullptr);

/// Writes floating tensors as fp32 (or bf16 when `bf16`), integer tensors
/// as I64 and bool ones as BOOL, with string metadata.
void saveSafetensors(const std::string &path, const ParamMap &tensors,
                     const std::map<std::string, std::string> &metadata = {},
                     bool bf16 = false);

} // namespace rlhf

#endif // RLHF_RUNTIME_SAFETENSORS_H
