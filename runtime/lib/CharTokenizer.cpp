//===- CharTokenizer.cpp - a vocabulary of the datasets' characters -------===//

#include "rlhf/runtime/CharTokenizer.h"

#include "rlhf/runtime/Error.h"

using namespace rlhf;

CharTokenizer::CharTokenizer(
    const std::vector<const JsonlDataset *> &datasets) {
  std::array<bool, 256> seen{};
  for (const JsonlDataset *d : datasets)
    for (size_t i = 0; i < d->size(); ++i)
      for (const auto &[field, text] : (*d)[i])
        for (unsigned char c : text)
          seen[c] = true;
  for (int c = 0; c < 256; ++c)
    if (seen[size_t(c)]) {
      idOf[size_t(c)] = 3 + int64_t(bytes.size());
      bytes.push_back(static_cast<unsigned char>(c));
    }
}

std::vector<int64_t> CharTokenizer::encode(const std::string &text,
                                           bool addBos) const {
  std::vector<int64_t> ids;
  if (addBos)
    ids.push_back(bos());
  for (unsigned char c : text) {
    if (!idOf[c])
      throw Error("character " + std::to_string(int(c)) +
                  " is not in the datasets' vocabulary");
    ids.push_back(idOf[c]);
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t> &ids) const {
  std::string s;
  for (int64_t id : ids)
    if (id >= 3 && id < vocabSize())
      s += char(bytes[size_t(id - 3)]);
  return s;
}
