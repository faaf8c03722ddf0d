//===- BpeTokenizer.cpp - Hugging Face byte-level BPE tokenizers ----------===//
//
// The encoding pipeline of the `tokenizers` library (0.22), stage by stage:
// added tokens are cut out of the raw text first, the rest is normalized,
// pre-tokenized into words of byte characters (BpePretokenize.cpp) and each
// word is merged by BPE; the post-processor's tokens go around the result.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/BpeTokenizer.h"

#include "BpePretokenize.h"
#include "rlhf/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <queue>
#include <unordered_map>

using namespace rlhf;
using namespace rlhf::bpe;
using nlohmann::json;

namespace {

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

} // namespace

static char32_t charBefore(const std::string &s, size_t i, size_t *at) {
  do
    --i;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80);
  *at = i;
  return nextChar(s, i);
}

void AddedMatcher::split(const std::string &s, std::vector<Piece> &out) const {
  size_t done = 0, pos = 0;
  while (!empty && pos < s.size()) {
    const AddedToken *m = nullptr;
    for (; pos < s.size() && !m; ++pos)
      for (const AddedToken *t : byFirst[static_cast<unsigned char>(s[pos])])
        if (s.compare(pos, t->pattern.size(), t->pattern) == 0) {
          m = t;
          break;
        }
    if (!m)
      break;
    size_t start = pos - 1, stop = start + m->pattern.size(), at;
    // The scan goes on after the match even where the rules drop it.
    pos = stop;
    if (m->singleWord) {
      size_t i = stop;
      bool wordBefore = start > 0 && isWordChar(charBefore(s, start, &at));
      bool wordAfter = stop < s.size() && isWordChar(nextChar(s, i));
      if (wordBefore || wordAfter)
        continue;
    }
    if (m->lstrip) {
      size_t b = start;
      while (b > 0 && isSpace(charBefore(s, b, &at)))
        b = at;
      start = std::max(b, done);
    }
    if (m->rstrip)
      for (size_t i = stop; i < s.size() && isSpace(nextChar(s, i));)
        stop = i;
    if (done < start)
      out.push_back({s.substr(done, start - done), -1});
    out.push_back({s.substr(start, stop - start), m->id});
    done = stop;
  }
  if (done < s.size())
    out.push_back({s.substr(done), -1});
}

struct BpeTokenizer::Impl {
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

static std::string lowerFirst(std::string s) {
  if (!s.empty())
    s[0] = char(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

/// Reads and parses a JSON file; `what` names it in errors.
static json readJson(const std::string &path, const std::string &what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("cannot open " + what + " '" + path +
                "': " + lowerFirst(std::strerror(errno)));
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error &e) {
    throw Error(what + " '" + path +
                "' is malformed json (syntax error at byte " +
                std::to_string(e.byte) + ")");
  }
  // Reading the file copies and walks its objects recursively; a corrupt
  // one nested thousands deep would overflow the stack. The library stops
  // at 128 (serde_json's recursion limit).
  constexpr int kMaxDepth = 128;
  std::vector<std::pair<const json *, int>> stack{{&j, 1}};
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (depth > kMaxDepth)
      throw Error(what + " '" + path + "' nests json deeper than " +
                  std::to_string(kMaxDepth) + " levels; it is corrupt");
    if (node->is_structured())
      for (const json &child : *node)
        stack.push_back({&child, depth + 1});
  }
  return j;
}

BpeTokenizer::Impl::Impl(const json &j, const std::string &path) : path(path) {
  if (!j.is_object())
    fail("expected a json object at the top level");
  if (!j.contains("model") || !j["model"].is_object())
    fail("no \"model\" object");
  readModel(j["model"]);
  readNormalizer(j.value("normalizer", json()));
  pre = std::make_unique<PreTokenizer>(j.value("pre_tokenizer", json()), path);
  if (!pre->byteLevel())
    fail("the pre-tokenizer has no ByteLevel step; only byte-level BPE "
         "tokenizers are supported");
  const json decoder = j.value("decoder", json());
  if (!decoder.is_object() || decoder.value("type", "") != "ByteLevel")
    fail("unsupported decoder " +
         (decoder.is_object() ? "type \"" + decoder.value("type", "") + "\""
                              : std::string("null")) +
         " (only ByteLevel is supported)");

  // Added tokens keep their order in the file; ids may repeat the model's.
  const json list = j.value("added_tokens", json::array());
  for (const json &t : list) {
    AddedToken a;
    a.content = t.at("content").get<std::string>();
    a.id = t.at("id").get<int64_t>();
    if (a.id < 0 || a.id > INT32_MAX)
      fail("added token \"" + a.content + "\" has an id out of range");
    if (a.content.empty())
      continue;
    a.singleWord = t.value("single_word", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.normalized = t.value("normalized", !t.value("special", false));
    a.pattern = a.normalized && nfc ? bpe::nfc(a.content) : a.content;
    if (a.pattern.empty())
      continue;
    added.push_back(std::move(a));
  }
  for (const AddedToken &a : added) {
    (a.normalized ? normalized : raw).add(&a);
    addedById[a.id] = &a;
    addedByContent.emplace(a.content, a.id);
    size = std::max(size, a.id + 1);
  }
  raw.finish();
  normalized.finish();
  readPostProcessor(j.value("post_processor", json()));
}

void BpeTokenizer::Impl::readModel(const json &m) {
  std::string type = m.value("type", m.contains("merges") ? "BPE" : "");
  if (type != "BPE")
    fail("unsupported model type \"" + type +
         "\" (only byte-level \"BPE\" is supported)");
  if (m.value("byte_fallback", false))
    fail("byte_fallback BPE models (LLaMA-2's and Mistral's tokenizer.json) "
         "are not supported; name the directory's sentencepiece model "
         "instead: tokenizer = \"DIR/tokenizer.model\" in the model's "
         "declaration");
  for (const char *k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null() && !m[k].get<std::string>().empty())
      fail(std::string("BPE models with a ") + k + " are not supported");
  if (m.contains("dropout") && !m["dropout"].is_null() &&
      m["dropout"].get<double>() > 0)
    fail("BPE dropout is not supported");
  if (!m.contains("vocab") || !m["vocab"].is_object())
    fail("the BPE model has no \"vocab\" object");
  if (!m.contains("merges") || !m["merges"].is_array())
    fail("the BPE model has no \"merges\" list");
  // Tokens are kept in a table by id, so an id far past the vocabulary's
  // size (a corrupt file) would allocate gigabytes: ids may leave gaps, up
  // to 2^20 past the entries.
  const int64_t entries = int64_t(m["vocab"].size()),
                idLimit = std::min<int64_t>(INT32_MAX, entries + (1 << 20));
  for (const auto &[token, idj] : m["vocab"].items()) {
    if (!idj.is_number_integer())
      fail("vocabulary token \"" + token + "\" has id " + idj.dump() +
           ", not an integer");
    int64_t id = idj.get<int64_t>();
    if (id < 0 || id >= idLimit)
      fail("vocabulary token \"" + token + "\" has id " + std::to_string(id) +
           ", out of range for a vocabulary of " + std::to_string(entries) +
           " entries");
    vocab[token] = id;
    if (size_t(id) >= tokens.size()) {
      tokens.resize(size_t(id) + 1);
      hasToken.resize(size_t(id) + 1);
    }
    tokens[size_t(id)] = token;
    hasToken[size_t(id)] = true;
  }
  size = int64_t(tokens.size());
  ignoreMerges = m.value("ignore_merges", false);
  fuseUnk = m.value("fuse_unk", false);
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    auto it = vocab.find(m["unk_token"].get<std::string>());
    if (it == vocab.end())
      fail("the unk_token is not in the vocabulary");
    unk = it->second;
  }
  auto idOf = [&](const std::string &t, size_t rank) {
    auto it = vocab.find(t);
    if (it == vocab.end())
      fail("merge " + std::to_string(rank + 1) + " uses \"" + t +
           "\", which is not in the vocabulary");
    return it->second;
  };
  const json &list = m["merges"];
  merges.reserve(list.size());
  for (size_t rank = 0; rank < list.size(); ++rank) {
    // "a b" in older files, ["a", "b"] in newer ones.
    std::string a, b;
    const json &e = list[rank];
    if (e.is_string()) {
      std::string s = e;
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        fail("merge " + std::to_string(rank + 1) + " is not two tokens");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() &&
               e[1].is_string()) {
      a = e[0];
      b = e[1];
    } else {
      fail("merge " + std::to_string(rank + 1) +
           " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    uint64_t key = uint64_t(idOf(a, rank)) << 32 | uint64_t(idOf(b, rank));
    merges[key] = {uint32_t(rank), idOf(a + b, rank)}; // later ranks win
  }
}

void BpeTokenizer::Impl::readNormalizer(const json &n) {
  if (n.is_null())
    return;
  if (!n.is_object())
    fail("the normalizer is " + std::string(n.type_name()) +
         ", not an object with a \"type\"");
  std::string type = n.value("type", "");
  if (type == "Sequence") {
    if (!n.contains("normalizers") || !n["normalizers"].is_array())
      fail("the Sequence normalizer has no \"normalizers\" list");
    for (const json &each : n["normalizers"])
      readNormalizer(each);
    return;
  }
  if (type != "NFC")
    fail("unsupported normalizer type \"" + type +
         "\" (only NFC is supported)");
  nfc = true;
}

void BpeTokenizer::Impl::readPostProcessor(const json &p) {
  std::string type = p.is_object() ? p.value("type", "") : "";
  if (p.is_null() || type == "ByteLevel") // ByteLevel only moves offsets
    return;
  if (type == "Sequence") {
    if (!p.contains("processors") || !p["processors"].is_array())
      fail("the Sequence post-processor has no \"processors\" list");
    for (const json &each : p["processors"]) {
      // Each wraps what the earlier ones made.
      std::vector<int64_t> inner = std::move(prefix), after = std::move(suffix);
      prefix.clear();
      suffix.clear();
      readPostProcessor(each);
      prefix.insert(prefix.end(), inner.begin(), inner.end());
      after.insert(after.end(), suffix.begin(), suffix.end());
      suffix = std::move(after);
    }
    return;
  }
  if (type != "TemplateProcessing")
    fail("unsupported post-processor type \"" + type +
         "\" (supported: TemplateProcessing, ByteLevel, Sequence)");
  bool seenA = false;
  for (const json &item : p.at("single")) {
    if (item.contains("Sequence")) {
      if (item["Sequence"].value("id", "") != "A")
        fail("the single-sequence template names a sequence other than A");
      seenA = true;
      continue;
    }
    std::string name = item.at("SpecialToken").at("id").get<std::string>();
    const json &special = p.at("special_tokens");
    if (!special.contains(name))
      fail("the template's special token \"" + name + "\" is not defined");
    for (const json &id : special[name].at("ids"))
      (seenA ? suffix : prefix).push_back(id.get<int64_t>());
  }
  if (!seenA)
    fail("the single-sequence template has no $A");
}

int64_t BpeTokenizer::Impl::id(const std::string &token) const {
  if (auto it = addedByContent.find(token); it != addedByContent.end())
    return it->second;
  auto it = vocab.find(token);
  return it == vocab.end() ? -1 : it->second;
}

/// model.rs's merge_word and word.rs's merge_all: the pair of lowest rank
/// merges first, the leftmost of equal ones; a queue entry whose pair has
/// changed since is dropped.
void BpeTokenizer::Impl::merge(const std::string &word,
                               std::vector<int64_t> &out) const {
  if (ignoreMerges)
    if (auto it = vocab.find(word); it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  constexpr size_t cacheWordBytes = 256, cacheWords = 1 << 16;
  if (word.size() < cacheWordBytes) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    if (auto it = cache.find(word); it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  struct Symbol {
    int64_t id;
    ptrdiff_t prev, next;
    size_t len; ///< bytes; 0 once merged into its left neighbour
  };
  std::vector<Symbol> syms;
  std::pair<int64_t, size_t> pendingUnk{-1, 0};
  auto push = [&](int64_t id, size_t len) {
    ptrdiff_t n = ptrdiff_t(syms.size());
    syms.push_back({id, n - 1, n + 1, len});
  };
  for (size_t i = 0; i < word.size();) {
    size_t b = i;
    nextChar(word, i);
    auto it = vocab.find(word.substr(b, i - b));
    if (it != vocab.end()) {
      if (pendingUnk.first >= 0)
        push(pendingUnk.first, pendingUnk.second);
      pendingUnk = {-1, 0};
      push(it->second, i - b);
    } else if (unk >= 0) {
      if (pendingUnk.first >= 0 && fuseUnk) {
        pendingUnk.second += i - b;
        continue;
      }
      if (pendingUnk.first >= 0)
        push(pendingUnk.first, pendingUnk.second);
      pendingUnk = {unk, i - b};
    } // else the library drops the character
  }
  if (pendingUnk.first >= 0)
    push(pendingUnk.first, pendingUnk.second);
  if (!syms.empty())
    syms.back().next = -1;

  struct Merge {
    uint32_t rank;
    size_t pos;
    int64_t id;
    bool operator<(const Merge &o) const { // the top is the least
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  auto pairOf = [&](size_t l,
                    size_t r) -> const std::pair<uint32_t, int64_t> * {
    auto it = merges.find(uint64_t(syms[l].id) << 32 | uint64_t(syms[r].id));
    return it == merges.end() ? nullptr : &it->second;
  };
  std::priority_queue<Merge> queue;
  for (size_t i = 0; i + 1 < syms.size(); ++i)
    if (auto *m = pairOf(i, i + 1))
      queue.push({m->first, i, m->second});
  while (!queue.empty()) {
    Merge top = queue.top();
    queue.pop();
    Symbol &cur = syms[top.pos];
    if (cur.len == 0 || cur.next < 0)
      continue;
    size_t right = size_t(cur.next);
    const auto *now = pairOf(top.pos, right);
    if (!now || now->second != top.id)
      continue;
    cur.id = top.id;
    cur.len += syms[right].len;
    cur.next = syms[right].next;
    syms[right].len = 0;
    if (cur.next >= 0)
      syms[size_t(cur.next)].prev = ptrdiff_t(top.pos);
    if (cur.prev >= 0)
      if (auto *m = pairOf(size_t(cur.prev), top.pos))
        queue.push({m->first, size_t(cur.prev), m->second});
    if (cur.next >= 0)
      if (auto *m = pairOf(top.pos, size_t(cur.next)))
        queue.push({m->first, top.pos, m->second});
  }
  std::vector<int64_t> ids;
  for (const Symbol &s : syms)
    if (s.len)
      ids.push_back(s.id);
  out.insert(out.end(), ids.begin(), ids.end());
  if (word.size() < cacheWordBytes) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    if (cache.size() >= cacheWords)
      cache.clear();
    cache.emplace(word, std::move(ids));
  }
}

BpeTokenizer::BpeTokenizer(const std::string &tokenizerJson,
                           const std::string &configJson) {
  json j = readJson(tokenizerJson, "tokenizer file");
  try {
    impl = std::make_unique<Impl>(j, tokenizerJson);
  } catch (const json::exception &e) {
    // Without nlohmann's "[json.exception.type_error.302] " tag.
    std::string what = e.what();
    size_t tag = what.find("] ");
    throw Error("tokenizer file '" + tokenizerJson +
                "' has an unexpected structure: " +
                (tag == std::string::npos ? what : what.substr(tag + 2)));
  }
  // Without a config, the post-processor's single leading token is the bos.
  if (impl->prefix.size() == 1)
    impl->bos = impl->prefix[0];
  if (configJson.empty())
    return;
  json c = readJson(configJson, "tokenizer config");
  if (!c.is_object())
    throw Error("tokenizer config '" + configJson + "' is not a json object");
  auto special = [&](const char *key, int64_t &slot) {
    if (!c.contains(key))
      return;
    const json &v = c[key];
    // A string, or an AddedToken object with its "content".
    const json *content =
        v.is_object() && v.contains("content") ? &v["content"] : &v;
    if (content->is_null()) {
      slot = -1;
      return;
    }
    if (!content->is_string())
      throw Error("tokenizer config '" + configJson + "': " + key +
                  " must be a string, a token object or null");
    slot = impl->id(content->get<std::string>());
    if (slot < 0)
      throw Error("tokenizer config '" + configJson + "': " + key + " \"" +
                  content->get<std::string>() + "\" is not a token of '" +
                  tokenizerJson + "'");
  };
  special("bos_token", impl->bos);
  special("eos_token", impl->eos);
  special("pad_token", impl->pad);
}

std::unique_ptr<BpeTokenizer>
BpeTokenizer::fromDirectory(const std::string &dir) {
  return fromFile(dir + "/tokenizer.json");
}

std::unique_ptr<BpeTokenizer>
BpeTokenizer::fromFile(const std::string &tokenizerJson) {
  std::string config = (std::filesystem::path(tokenizerJson).parent_path() /
                        "tokenizer_config.json")
                           .string();
  if (!std::ifstream(config))
    config.clear();
  return std::make_unique<BpeTokenizer>(tokenizerJson, config);
}

BpeTokenizer::~BpeTokenizer() = default;

std::vector<int64_t> BpeTokenizer::encode(const std::string &text,
                                          bool addBos) const {
  if (size_t at = invalidUtf8At(text); at != std::string::npos)
    throw Error("cannot tokenize text that is not valid utf-8 (byte " +
                std::to_string(at) + ")");
  // Added tokens that match the raw text, then those that match it
  // normalized; normalization runs piece by piece between them.
  std::vector<Piece> rawPieces, pieces;
  impl->raw.split(text, rawPieces);
  for (Piece &p : rawPieces) {
    if (p.id >= 0) {
      pieces.push_back(std::move(p));
      continue;
    }
    impl->normalized.split(impl->nfc ? nfc(p.text) : p.text, pieces);
  }
  std::vector<int64_t> ids;
  if (addBos)
    ids = impl->prefix;
  std::vector<std::string> words;
  for (const Piece &p : pieces) {
    if (p.id >= 0) {
      ids.push_back(p.id);
      continue;
    }
    words.clear();
    impl->pre->run(p.text, words);
    for (const std::string &w : words)
      impl->merge(w, ids);
  }
  if (addBos)
    ids.insert(ids.end(), impl->suffix.begin(), impl->suffix.end());
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<int64_t> &ids) const {
  // byteChars() inverted: every byte character is below U+0144.
  static const std::array<int, 0x144> byteOf = [] {
    std::array<int, 0x144> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) {
      size_t i = 0;
      t[nextChar(byteChars()[size_t(b)], i)] = b;
    }
    return t;
  }();
  std::string out;
  for (int64_t id : ids) {
    // An added token that reuses a vocabulary id (the library gives "é"
    // the id of its byte) decodes as that token: BPE output holds the id.
    if (auto it = impl->addedById.find(id);
        it != impl->addedById.end() &&
        (id < 0 || size_t(id) >= impl->tokens.size() ||
         !impl->hasToken[size_t(id)])) {
      out += it->second->content;
      continue;
    }
    if (id < 0 || size_t(id) >= impl->tokens.size() ||
        !impl->hasToken[size_t(id)])
      continue;
    // As the library's ByteLevel decoder: a token that is not all byte
    // characters is written as it is.
    const std::string &t = impl->tokens[size_t(id)];
    std::string bytes;
    bool all = true;
    for (size_t i = 0; i < t.size() && all;) {
      char32_t c = nextChar(t, i);
      all = c < byteOf.size() && byteOf[c] >= 0;
      if (all)
        bytes += char(byteOf[c]);
    }
    out += all ? bytes : t;
  }
  return out;
}

int64_t BpeTokenizer::vocabSize() const { return impl->size; }
int64_t BpeTokenizer::pad() const { return impl->pad; }
int64_t BpeTokenizer::bos() const { return impl->bos; }
int64_t BpeTokenizer::eos() const { return impl->eos; }
int64_t BpeTokenizer::tokenId(const std::string &token) const {
  return impl->id(token);
}
