//===- BpeTokenizerRead.cpp - reading tokenizer.json ----------------------===//
//
// Builds a BpeTokenizer's tables from the `tokenizers` library's files: the
// BPE model's vocabulary and merges, the normalizer, the added tokens and
// the post-processor of tokenizer.json, and the special tokens that
// tokenizer_config.json names. Anything it does not support is an error
// naming the file.
//
//===----------------------------------------------------------------------===//

#include "BpeImpl.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace rlhf;
using namespace rlhf::bpe;
using nlohmann::json;

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
