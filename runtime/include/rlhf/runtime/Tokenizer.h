//===- Tokenizer.h - sentencepiece tokenizer --------------------*- C++ -*-===//

#ifndef RLHF_RUNTIME_TOKENIZER_H
#define RLHF_RUNTIME_TOKENIZER_H

#include <memory>
#include <string>
#include <vector>

namespace rlhf {

class Tokenizer {
public:
  /// Loads a sentencepiece model; throws rlhf::Error naming the file.
  explicit Tokenizer(const std::string &modelPath);
  ~Tokenizer();

  std::vector<int64_t> encode(const std::string &text, bool addBos = true) const;
  std::string decode(const std::vector<int64_t> &ids) const;
  int64_t vocabSize() const;
  int64_t bos() const;
  int64_t eos() const;
  int64_t pad() const;

  Tokenizer(const Tokenizer &) = delete;
  Tokenizer &operator=(const Tokenizer &) = delete;

private:
  void *handle = nullptr; ///< a SentencePieceProcessor inside the shim
};

} // namespace rlhf

#endif // RLHF_RUNTIME_TOKENIZER_H
