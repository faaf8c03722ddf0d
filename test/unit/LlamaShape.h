//===- LlamaShape.h - LLaMA-style model shapes for unit tests ---*- C++ -*-===//

#ifndef RLHFC_TEST_UNIT_LLAMASHAPE_H
#define RLHFC_TEST_UNIT_LLAMASHAPE_H

#include "rlhf/runtime/ReallocPlan.h"

namespace rlhfc::shapes {

/// A LLaMA-2-style decoder with the 32000-token vocabulary.
inline rlhf::ModelShape llamaShape(int64_t layers, int64_t hidden,
                                   int64_t heads, int64_t kvHeads,
                                   int64_t ffn) {
  rlhf::ModelShape s;
  s.layers = layers;
  s.hidden = hidden;
  s.heads = heads;
  s.kvHeads = kvHeads;
  s.ffn = ffn;
  s.vocab = 32000;
  return s;
}

} // namespace rlhfc::shapes

#endif // RLHFC_TEST_UNIT_LLAMASHAPE_H
