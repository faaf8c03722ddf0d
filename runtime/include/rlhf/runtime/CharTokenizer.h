//===- CharTokenizer.h - a vocabulary of the datasets' characters -*- C++
//-*-===//
//
// For programs without a sentencepiece model, such as the tiny examples: ids
// 0, 1 and 2 are pad, bos and eos, then every byte that occurs in the
// datasets, in byte order. All ranks read the same files, so they build the
// same vocabulary.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_CHARTOKENIZER_H
#define RLHF_RUNTIME_CHARTOKENIZER_H

#include "rlhf/runtime/Dataset.h"
#include "rlhf/runtime/TextTokenizer.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace rlhf {

class CharTokenizer : public TextTokenizer {
public:
  explicit CharTokenizer(const std::vector<const JsonlDataset *> &datasets);

  /// Throws rlhf::Error for a byte the datasets never used.
  std::vector<int64_t> encode(const std::string &text,
                              bool addBos) const override;
  std::string decode(const std::vector<int64_t> &ids) const override;
  int64_t vocabSize() const override { return 3 + int64_t(bytes.size()); }
  int64_t pad() const override { return 0; }
  int64_t bos() const override { return 1; }
  int64_t eos() const override { return 2; }

private:
  std::vector<unsigned char> bytes; ///< id 3 + i is bytes[i]
  std::array<int64_t, 256> idOf{};  ///< 0: not in the vocabulary
};

} // namespace rlhf

#endif // RLHF_RUNTIME_CHARTOKENIZER_H
