//===- Types.h - record and tensor types of .rlhf values --------*- C++ -*-===//
//
// Every value flowing through an algorithm is a record of named tensors. A
// tensor's kind says what it means (token ids, logprobs, values...), so Sema
// can reject logprobs where token ids are needed even though both are
// [batch, seq] tensors.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_FRONTEND_TYPES_H
#define RLHFC_FRONTEND_TYPES_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace rlhfc {

enum class TensorKind {
  Tokens,     ///< token ids of prompts or whole sequences
  Answer,     ///< token ids of a reference answer (verifiable rewards)
  Mask,       ///< 1 where a token was generated
  Logprobs,   ///< per-token log-probabilities
  Values,     ///< per-token value estimates
  Score,      ///< one scalar reward per sequence
  Advantages, ///< per-token or per-sequence advantages
  Returns,    ///< per-token value targets
  Loss,       ///< a scalar training loss
  Number,     ///< plain numbers a function computed (`number[N, S]`)
};
llvm::StringRef tensorKindName(TensorKind k);
/// What a person calls the kind in an error: "token ids", "logprobs".
llvm::StringRef tensorKindNoun(TensorKind k);

enum class DType { I32, I8, F32 };
llvm::StringRef dtypeName(DType d);

struct TensorType {
  TensorKind kind;
  DType dtype;
  llvm::SmallVector<int64_t, 2> shape; ///< [batch] or [batch, seq]

  int64_t batch() const { return shape.empty() ? 1 : shape[0]; }
  /// "logprobs f32[512, 256]".
  std::string str() const;
  bool operator==(const TensorType &o) const {
    return kind == o.kind && dtype == o.dtype && shape == o.shape;
  }
};

struct Field {
  std::string name;
  TensorType type;
};

struct RecordType {
  std::vector<Field> fields;

  const Field *find(llvm::StringRef name) const;
  /// "{seq: tokens i32[512, 256], logprobs: ...}".
  std::string str() const;
};

} // namespace rlhfc

#endif // RLHFC_FRONTEND_TYPES_H
