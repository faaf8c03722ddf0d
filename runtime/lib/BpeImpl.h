//===- BpeImpl.h - a byte-level BPE tokenizer's tables (private) -*- C++
//-*-===//
//
// What BpeTokenizer reads from tokenizer.json (BpeTokenizerRead.cpp) and
// encodes and decodes with (BpeTokenizer.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_LIB_BPEIMPL_H
#define RLHF_RUNTIME_LIB_BPEIMPL_H

#include "rlhf/runtime/BpeTokenizer.h"

#include "BpePretokenize.h"
#include "rlhf/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace rlhf::bpe {

struct AddedToken {
  std::string content; ///< what decode writes
  std::string pattern; ///< what matches: content, normalized if it says so
  int64_t id = -1;
  bool singleWord = false, lstrip = false, rstrip = false, normalized = false;
};

/// A stretch of text, or an added token (id >= 0) that is never split.
struct Piece {
  std::string text;
  int64_t id = -1;
};

/// added_vocabulary.rs's find_matches: a leftmost-longest scan for a set of
/// added tokens, with their single_word, lstrip and rstrip rules.
class AddedMatcher {
public:
  void add(const AddedToken *t) {
    byFirst[static_cast<unsigned char>(t->pattern[0])].push_back(t);
    empty = false;
  }
  void finish() {
    for (auto &list : byFirst)
      std::stable_sort(list.begin(), list.end(), [](auto *a, auto *b) {
        return a->pattern.size() > b->pattern.size();
      });
  }
  void split(const std::string &s, std::vector<Piece> &out) const;

private:
  std::array<std::vector<const AddedToken *>, 256> byFirst;
  bool empty = true;
};

} // namespace rlhf::bpe

struct rlhf::BpeTokenizer::Impl {
  using json = nlohmann::json;
  using AddedToken = bpe::AddedToken;
  using AddedMatcher = bpe::AddedMatcher;
  using PreTokenizer = bpe::PreTokenizer;
  Impl(const json &j, const std::string &path);

  std::string path;
  std::unordered_map<std::string, int64_t> vocab;
  std::vector<std::string> tokens; ///< the model's, by id
  std::vector<bool> hasToken;
  /// (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<uint32_t, int64_t>> merges;
  bool ignoreMerges = false, fuseUnk = false;
  int64_t unk = -1;

  std::vector<AddedToken> added;
  std::unordered_map<int64_t, const AddedToken *> addedById;
  std::unordered_map<std::string, int64_t> addedByContent;
  AddedMatcher raw, normalized; ///< by their `normalized` flag
  bool nfc = false;
  std::unique_ptr<PreTokenizer> pre;

  std::vector<int64_t> prefix, suffix; ///< the post-processor's
  int64_t bos = -1, eos = -1, pad = -1, size = 0;

  mutable std::mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache;

  void merge(const std::string &word, std::vector<int64_t> &out) const;
  void readModel(const json &m);
  void readNormalizer(const json &n);
  void readPostProcessor(const json &p);
  int64_t id(const std::string &token) const;
  [[noreturn]] void fail(const std::string &why) const {
    throw Error("tokenizer file '" + path + "': " + why);
  }
};

#endif // RLHF_RUNTIME_LIB_BPEIMPL_H
