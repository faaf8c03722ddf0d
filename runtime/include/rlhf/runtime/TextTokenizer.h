//===- TextTokenizer.h - what a compiled program tokenizes with -*- C++ -*-===//
//
// The interface the program runtime uses: the tokenizer the program names (a
// model's `tokenizer`: a sentencepiece .model, or a Hugging Face
// tokenizer.json or its directory), otherwise the datasets' characters.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_TEXTTOKENIZER_H
#define RLHF_RUNTIME_TEXTTOKENIZER_H

#include <cstdint>
#include <memory>
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

/// The tokenizer at `path`: byte-level BPE for a tokenizer.json or a
/// directory holding one (with its tokenizer_config.json), sentencepiece
/// otherwise. Throws rlhf::Error naming the path; a BPE tokenizer must name
/// a pad token, since the runtime pads with it and masks it out.
std::unique_ptr<TextTokenizer> loadTokenizer(const std::string &path);

} // namespace rlhf

#endif // RLHF_RUNTIME_TEXTTOKENIZER_H
