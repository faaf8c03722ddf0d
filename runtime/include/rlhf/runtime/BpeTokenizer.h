//===- BpeTokenizer.h - Hugging Face byte-level BPE tokenizers --*- C++ -*-===//
//
// Reads a tokenizer.json as the Hugging Face `tokenizers` library writes it
// for GPT-2, LLaMA-3 and Qwen2 (a BPE model over GPT-2's byte characters,
// added tokens, a Split/ByteLevel pre-tokenizer, an optional NFC
// normalizer) and encodes to the library's ids. tokenizer_config.json, when
// given, names the bos, eos and pad tokens. The file's padding and
// truncation settings are ignored: the runtime pads and truncates itself.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_BPETOKENIZER_H
#define RLHF_RUNTIME_BPETOKENIZER_H

#include "rlhf/runtime/TextTokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace rlhf {

class BpeTokenizer : public TextTokenizer {
public:
  /// Loads `tokenizerJson` and, unless empty, `configJson`. Throws
  /// rlhf::Error naming the file and what is wrong with it: missing,
  /// malformed, or a model, normalizer, pre-tokenizer, post-processor or
  /// decoder this class does not implement.
  explicit BpeTokenizer(const std::string &tokenizerJson,
                        const std::string &configJson = "");
  /// dir/tokenizer.json, with dir/tokenizer_config.json where present.
  static std::unique_ptr<BpeTokenizer> fromDirectory(const std::string &dir);
  /// A tokenizer json of any name, with the tokenizer_config.json beside it
  /// where present.
  static std::unique_ptr<BpeTokenizer>
  fromFile(const std::string &tokenizerJson);
  ~BpeTokenizer() override;

  /// `addBos` adds what the file's post-processor adds around one sequence:
  /// LLaMA-3's <|begin_of_text|>; nothing for GPT-2 or Qwen2. Added tokens
  /// in the text are recognized. Throws rlhf::Error for text that is not
  /// UTF-8.
  std::vector<int64_t> encode(const std::string &text,
                              bool addBos) const override;
  /// The bytes of every token, special ones (bos, eos, pad) included, so
  /// that decode(encode(text)) is text; ids without a token are skipped.
  /// Byte tokens that split a character join back up.
  std::string decode(const std::vector<int64_t> &ids) const override;
  /// One past the largest id of the vocabulary and the added tokens.
  int64_t vocabSize() const override;
  /// -1 where tokenizer_config.json names none. Without a config, bos is
  /// the single token the post-processor puts in front, if it has one.
  int64_t pad() const override;
  int64_t bos() const override;
  int64_t eos() const override;
  /// The id of a token's text, an added token's first; -1 if none.
  int64_t tokenId(const std::string &token) const;

  BpeTokenizer(const BpeTokenizer &) = delete;
  BpeTokenizer &operator=(const BpeTokenizer &) = delete;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace rlhf

#endif // RLHF_RUNTIME_BPETOKENIZER_H
