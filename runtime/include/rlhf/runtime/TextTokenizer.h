//===- TextTokenizer.h - what a compiled program tokenizes with -*- C++ -*-===//
//
// The interface the program runtime uses: a sentencepiece model where the
// program names one (a model's `tokenizer`), otherwise the datasets'
// character vocabulary.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_TEXTTOKENIZER_H
#define RLHF_RUNTIME_TEXTTOKENIZER_H

#include <cstdint>
#include <string>
#include <vector>

namespace rlhf {

class TextTokenizer {
public:
  virtual ~TextTokenizer() = default;
  virtual std::vector<int64_t> encode(const std::string &text,
                                      bool addBos) const = 0;
  virtual std::string decode(const std::vector<int64_t> &ids) const = 0;
  virtual int64_t vocabSize() const = 0;
  virtual int64_t pad() const = 0;
  virtual int64_t bos() const = 0;
  virtual int64_t eos() const = 0;
};

} // namespace rlhf

#endif // RLHF_RUNTIME_TEXTTOKENIZER_H
