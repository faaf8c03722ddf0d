//===- BpePretokenize.h - text to words for BpeTokenizer --------*- C++ -*-===//
//
// Private to runtime/lib: the stages of a Hugging Face tokenizer.json that
// run before the BPE model: the normalizer (NFC, through ICU), the
// pre-tokenizer (Split with a regex, through PCRE2, and ByteLevel) and the
// Unicode helpers they and the added-token matcher share. Each stage
// follows the `tokenizers` library (0.22) so that ids come out the same.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_LIB_BPEPRETOKENIZE_H
#define RLHF_RUNTIME_LIB_BPEPRETOKENIZE_H

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace rlhf::bpe {

/// The byte where `s` stops being valid UTF-8 (no overlongs, surrogates or
/// code points past U+10FFFF), or npos.
size_t invalidUtf8At(const std::string &s);
/// Decodes the character at `i` of valid UTF-8 and advances `i` past it.
char32_t nextChar(const std::string &s, size_t &i);
/// Rust's regex `\s` (White_Space) and `\w` (Alphabetic, marks, decimal
/// digits, connector punctuation, join controls), which the library's
/// added-token matcher uses.
bool isSpace(char32_t c);
bool isWordChar(char32_t c);
/// NFC of valid UTF-8.
std::string nfc(const std::string &s);

/// GPT-2's bytes_to_unicode: the UTF-8 of the printable character standing
/// for each byte.
const std::array<std::string, 256> &byteChars();

/// A PCRE2 pattern searched the way the library's Oniguruma patterns are.
class Regex {
public:
  /// `literal`: the pattern is a plain string. Throws rlhf::Error with
  /// `where` and PCRE2's message when it does not compile.
  Regex(const std::string &pattern, bool literal, const std::string &where);
  ~Regex();
  Regex(const Regex &) = delete;
  Regex &operator=(const Regex &) = delete;
  /// Every match [begin, end) of valid UTF-8 `s`, left to right, without
  /// overlaps; an empty match right after a match is skipped.
  std::vector<std::pair<size_t, size_t>> findAll(const std::string &s) const;

private:
  void *code = nullptr; ///< pcre2_code_8
  bool jit = false;
};

/// The pre-tokenizer: a list of Split and ByteLevel steps. Each step splits
/// every piece further; ByteLevel also rewrites bytes as byteChars().
class PreTokenizer {
public:
  /// Reads tokenizer.json's `pre_tokenizer`; throws rlhf::Error naming
  /// `path` and the unsupported type or malformed field.
  PreTokenizer(const nlohmann::json &j, const std::string &path);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer &&) noexcept;
  /// Appends the words of normalized text `s` to `out`, never empty ones.
  void run(const std::string &s, std::vector<std::string> &out) const;
  /// Whether some step maps bytes to byteChars(), as the decoder assumes.
  bool byteLevel() const;

private:
  struct Step;
  static void parse(const nlohmann::json &j, const std::string &path,
                    std::vector<Step> &steps);
  std::vector<Step> steps;
};

} // namespace rlhf::bpe

#endif // RLHF_RUNTIME_LIB_BPEPRETOKENIZE_H
