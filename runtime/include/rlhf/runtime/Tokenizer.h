//===- Tokenizer.h - sentencepiece tokenizer --------------------*- C++ -*-===//

#ifndef RLHF_RUNTIME_TOKENIZER_H
#define RLHF_RUNTIME_TOKENIZER_H

#include "rlhf/runtime/TextTokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace rlhf {

class Tokenizer : public TextTokenizer {
public:
  /// Loads a sentencepiece model; throws rlhf::Error naming the file.
  explicit Tokenizer(const std::string &modelPath);
  ~Tokenizer() override;

  std::vector<int64_t> encode(const std::string &text,
                              bool addBos = true) const override;
  std::string decode(const std::vector<int64_t> &ids) const override;
  int64_t vocabSize() const override;
  int64_t bos() const override;
  int64_t eos() const override;
  /// The model's pad id; models without one (LLaMA's) pad with unk.
  int64_t pad() const override;

  Tokenizer(const Tokenizer &) = delete;
  Tokenizer &operator=(const Tokenizer &) = delete;

private:
  void *handle = nullptr; ///< a SentencePieceProcessor inside the shim
};

} // namespace rlhf

#endif // RLHF_RUNTIME_TOKENIZER_H
