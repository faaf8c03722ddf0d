//===- Types.cpp - record and tensor types of .rlhf values ----------------===//

#include "rlhfc/Frontend/Types.h"

#include "llvm/Support/raw_ostream.h"

using namespace rlhfc;

llvm::StringRef rlhfc::tensorKindName(TensorKind k) {
  switch (k) {
  case TensorKind::Tokens: return "tokens";
  case TensorKind::Answer: return "answer";
  case TensorKind::Mask: return "mask";
  case TensorKind::Logprobs: return "logprobs";
  case TensorKind::Values: return "values";
  case TensorKind::Score: return "score";
  case TensorKind::Advantages: return "advantages";
  case TensorKind::Returns: return "returns";
  case TensorKind::Loss: return "loss";
  case TensorKind::Number:
    return "number";
  }
  return "?";
}

llvm::StringRef rlhfc::tensorKindNoun(TensorKind k) {
  switch (k) {
  case TensorKind::Tokens: return "token ids";
  case TensorKind::Answer: return "reference answer tokens";
  case TensorKind::Mask: return "a generation mask";
  case TensorKind::Logprobs: return "logprobs";
  case TensorKind::Values: return "per-token values";
  case TensorKind::Score: return "per-sequence scores";
  case TensorKind::Advantages: return "advantages";
  case TensorKind::Returns: return "returns";
  case TensorKind::Loss: return "a loss";
  case TensorKind::Number:
    return "plain numbers";
  }
  return "?";
}

llvm::StringRef rlhfc::dtypeName(DType d) {
  switch (d) {
  case DType::I32: return "i32";
  case DType::I8: return "i8";
  case DType::F32: return "f32";
  }
  return "?";
}

std::string TensorType::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << tensorKindName(kind) << " " << dtypeName(dtype) << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << "]";
  return s;
}

const Field *RecordType::find(llvm::StringRef name) const {
  for (const Field &f : fields)
    if (f.name == name)
      return &f;
  return nullptr;
}

std::string RecordType::str() const {
  std::string s = "{";
  for (size_t i = 0; i < fields.size(); ++i)
    s += (i ? ", " : "") + fields[i].name + ": " + fields[i].type.str();
  return s + "}";
}
