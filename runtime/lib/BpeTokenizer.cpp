//===- BpeTokenizer.cpp - Hugging Face byte-level BPE tokenizers ----------===//
//
// The encoding pipeline of the `tokenizers` library (0.22), stage by stage:
// added tokens are cut out of the raw text first, the rest is normalized,
// pre-tokenized into words of byte characters (BpePretokenize.cpp) and each
// word is merged by BPE; the post-processor's tokens go around the result.
//
//===----------------------------------------------------------------------===//

#include "BpeImpl.h"

#include <iterator>
#include <queue>

using namespace rlhf;
using namespace rlhf::bpe;
using nlohmann::json;

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
