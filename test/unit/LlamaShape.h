//===- LlamaShape.h - LLaMA-style model shapes for unit tests ---*- C++ -*-===//

#ifndef RLHFC_TEST_UNIT_LLAMASHAPE_H
#define RLHFC_TEST_UNIT_LLAMASHAPE_H

#include "rlhf/runtime/ReallocPlan.h"

namespace rlhfc::shapes {

/// A LLaMA-2-style decoder with the 32000-token vocabulary.
inline rlhf::ModelShape llamaShape(int64_t layers, int64_t hidden,
                                   int64_t heads, int64_t kvHeads,
                                   int64_t ffn) {
  return rlhf::ModelShape{layers, hidden, heads, kvHeads, ffn, 32000};
}

} // namespace rlhfc::shapes

#endif // RLHFC_TEST_UNIT_LLAMASHAPE_H
