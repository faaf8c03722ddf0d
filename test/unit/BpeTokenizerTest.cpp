//===- BpeTokenizerTest.cpp - BpeTokenizer against `tokenizers` -----------===//
//
// Golden tests: scripts/hf-fixtures.py builds small GPT-2, LLaMA-3 and Qwen2
// style tokenizers with the Hugging Face `tokenizers` library and records
// its ids for a list of awkward strings; BpeTokenizer must give the same ids
// and decode them back. RLHF_BPE_FIXTURES names the script's output folder.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/BpeTokenizer.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/TextTokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

using namespace rlhf;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string fixtures() {
  const char *dir = std::getenv("RLHF_BPE_FIXTURES");
  if (!dir || !*dir)
    throw std::runtime_error(
        "RLHF_BPE_FIXTURES is not set: run scripts/hf-fixtures.py tokenizers "
        "DIR and set RLHF_BPE_FIXTURES=DIR");
  if (!fs::is_directory(dir))
    throw std::runtime_error(std::string("RLHF_BPE_FIXTURES=") + dir +
                             " is not a directory");
  return dir;
}

json readJson(const fs::path &p) {
  std::ifstream in(p);
  if (!in)
    throw std::runtime_error("cannot read " + p.string());
  return json::parse(in);
}

/// The id the tokenizer.json itself gives an added token.
int64_t addedId(const std::string &name, const std::string &content) {
  json j = readJson(fs::path(fixtures()) / name / "tokenizer.json");
  for (const json &t : j["added_tokens"])
    if (t["content"] == content)
      return t["id"];
  throw std::runtime_error(content + " is not an added token of " + name);
}

/// `s` with every byte outside printable ASCII as \xNN.
std::string printable(const std::string &s) {
  std::string out;
  for (unsigned char c : s) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02X", c);
    out += c >= 0x20 && c < 0x7F ? std::string(1, char(c)) : hex;
  }
  return out;
}

/// Whether `s` ends inside a UTF-8 character.
bool endsMidCharacter(const std::string &s) {
  size_t i = s.size(), back = 0;
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80)
    --i, ++back;
  if (i == 0)
    return back > 0;
  unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  size_t need = lead < 0x80 ? 0 : lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : 1;
  return back != need;
}

/// Rust's String::from_utf8_lossy, as the library's decode ends: one
/// U+FFFD for each maximal prefix of a character cut short, or stray byte.
std::string lossy(const std::string &s) {
  std::string out;
  auto at = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  for (size_t i = 0; i < s.size();) {
    unsigned c = at(i);
    size_t len = c < 0x80   ? 1
                 : c < 0xC2 ? 0
                 : c < 0xE0 ? 2
                 : c < 0xF0 ? 3
                 : c < 0xF5 ? 4
                            : 0;
    size_t n = 1; // bytes of this character that are valid so far
    while (n < len && i + n < s.size()) {
      // The second byte's range rules out overlongs and surrogates.
      unsigned b = at(i + n), lo = 0x80, hi = 0xBF;
      if (n == 1 && (c == 0xE0 || c == 0xF0))
        lo = c == 0xE0 ? 0xA0 : 0x90;
      if (n == 1 && (c == 0xED || c == 0xF4))
        hi = c == 0xED ? 0x9F : 0x8F;
      if (b < lo || b > hi)
        break;
      ++n;
    }
    if (len && n == len)
      out += s.substr(i, n);
    else
      out += "\xEF\xBF\xBD";
    i += n;
  }
  return out;
}

class Golden : public testing::TestWithParam<std::string> {};

TEST_P(Golden, MatchesTheTokenizersLibrary) {
  fs::path dir = fs::path(fixtures()) / GetParam();
  json golden = readJson(dir / "golden.json");
  auto tok = BpeTokenizer::fromDirectory(dir.string());
  EXPECT_EQ(tok->vocabSize(), golden["vocab_size"].get<int64_t>());
  const json &cases = golden["cases"];
  ASSERT_GE(cases.size(), 30u) << "golden.json lost its test strings";
  for (const json &c : cases) {
    std::string text = c["text"];
    SCOPED_TRACE(printable(text));
    std::vector<int64_t> ids = tok->encode(text, false);
    EXPECT_EQ(ids, c["ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(tok->encode(text, true),
              c["ids_with_special"].get<std::vector<int64_t>>());
    // The library's decode replaces bytes that are not UTF-8.
    std::string decoded = tok->decode(ids);
    EXPECT_EQ(lossy(decoded), c["decoded"].get<std::string>());
    if (c["roundtrip"]) {
      EXPECT_EQ(decoded, text);
    }
    // Token by token, the bytes are the same.
    std::string joined;
    for (int64_t id : ids)
      joined += tok->decode({id});
    EXPECT_EQ(joined, decoded);
  }
  const json &each = golden["decode"];
  ASSERT_GE(each.size(), 256u) << "golden.json lost its decode list";
  for (const json &d : each)
    EXPECT_EQ(tok->decode({d["id"].get<int64_t>()}),
              d["text"].get<std::string>())
        << "id " << d["id"];
}

INSTANTIATE_TEST_SUITE_P(BpeTokenizer, Golden,
                         testing::Values("gpt2", "gpt2-prefix", "llama3",
                                         "qwen2", "split-string",
                                         "split-invert", "split-contiguous",
                                         "split-removed", "split-empty"),
                         [](const auto &info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(BpeTokenizer, ByteTokensSplittingACharacterJoinBack) {
  auto tok = BpeTokenizer::fromDirectory(fixtures() + "/gpt2");
  std::string text = "\xF0\x9F\xA6\x80 \xF0\x90\x8D\x88 \xE2\xBF\xB0"; // rare
  std::vector<int64_t> ids = tok->encode(text, false);
  bool split = false;
  std::string joined;
  for (int64_t id : ids) {
    std::string piece = tok->decode({id});
    joined += piece;
    split |= endsMidCharacter(joined);
  }
  EXPECT_TRUE(split) << "no token boundary fell inside a character";
  EXPECT_EQ(joined, text);
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(BpeTokenizer, SpecialTokensComeFromTheConfig) {
  auto llama = BpeTokenizer::fromDirectory(fixtures() + "/llama3");
  EXPECT_EQ(llama->bos(), addedId("llama3", "<|begin_of_text|>"));
  EXPECT_EQ(llama->eos(), addedId("llama3", "<|eot_id|>"));
  EXPECT_EQ(llama->pad(), -1);
  EXPECT_EQ(llama->encode("", true), std::vector<int64_t>{llama->bos()});
  EXPECT_EQ(llama->decode({llama->eos()}), "<|eot_id|>");

  auto qwen = BpeTokenizer::fromDirectory(fixtures() + "/qwen2");
  EXPECT_EQ(qwen->bos(), -1);
  EXPECT_EQ(qwen->eos(), addedId("qwen2", "<|im_end|>"));
  EXPECT_EQ(qwen->pad(), addedId("qwen2", "<|endoftext|>"));
  EXPECT_TRUE(qwen->encode("", true).empty());

  // An AddedToken object in the config, as older files write it.
  auto prefix = BpeTokenizer::fromDirectory(fixtures() + "/gpt2-prefix");
  EXPECT_EQ(prefix->eos(), addedId("gpt2-prefix", "<|endoftext|>"));
  EXPECT_EQ(prefix->bos(), -1);
}

TEST(BpeTokenizer, WithoutAConfigTheTemplateGivesTheBos) {
  BpeTokenizer tok(fixtures() + "/llama3/tokenizer.json");
  EXPECT_EQ(tok.bos(), addedId("llama3", "<|begin_of_text|>"));
  EXPECT_EQ(tok.eos(), -1);
  EXPECT_EQ(tok.tokenId("<|eot_id|>"), addedId("llama3", "<|eot_id|>"));
  EXPECT_EQ(tok.tokenId("no such token"), -1);
}

/// A scratch folder, removed at the end of the test.
class BpeTokenizerErrors : public testing::Test {
protected:
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "bpe-tokenizer-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir = tmpl;
  }
  void TearDown() override { fs::remove_all(dir); }

  /// Writes a copy of the llama3 fixture, changed by `edit`.
  std::string write(const std::function<void(json &)> &edit) {
    json j = readJson(fs::path(fixtures()) / "llama3" / "tokenizer.json");
    edit(j);
    return writeText("tokenizer.json", j.dump());
  }
  std::string writeText(const std::string &name, const std::string &text) {
    std::string p = (dir / name).string();
    std::ofstream(p) << text;
    return p;
  }
  /// The message BpeTokenizer throws for these files.
  static std::string error(const std::string &file,
                           const std::string &config = "") {
    try {
      BpeTokenizer tok(file, config);
    } catch (const Error &e) {
      return e.what();
    }
    return "no error";
  }

  fs::path dir;
};

TEST_F(BpeTokenizerErrors, MissingFile) {
  std::string p = (dir / "absent" / "tokenizer.json").string();
  std::string msg = error(p);
  EXPECT_NE(msg.find("'" + p + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no such file"), std::string::npos) << msg;
}

TEST_F(BpeTokenizerErrors, MalformedJson) {
  std::string p = writeText("tokenizer.json", "{\"model\": {\"type\": ");
  std::string msg = error(p);
  EXPECT_NE(msg.find("'" + p + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed json"), std::string::npos) << msg;
}

TEST_F(BpeTokenizerErrors, UnsupportedModel) {
  for (const char *type : {"WordPiece", "Unigram"}) {
    std::string p = write([&](json &j) { j["model"]["type"] = type; });
    std::string msg = error(p);
    EXPECT_NE(msg.find("'" + p + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string("unsupported model type \"") + type),
              std::string::npos)
        << msg;
  }
}

TEST_F(BpeTokenizerErrors, UnsupportedNormalizerAndPreTokenizer) {
  std::string p = write([](json &j) {
    j["normalizer"] = {{"type", "Lowercase"}};
  });
  std::string msg = error(p);
  EXPECT_NE(msg.find("'" + p + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unsupported normalizer type \"Lowercase\""),
            std::string::npos)
      << msg;

  // A Sequence without its list says so, not that Sequence is unsupported.
  p = write([](json &j) { j["normalizer"] = {{"type", "Sequence"}}; });
  msg = error(p);
  EXPECT_NE(msg.find("the Sequence normalizer has no \"normalizers\" list"),
            std::string::npos)
      << msg;
  p = write([](json &j) { j["post_processor"] = {{"type", "Sequence"}}; });
  msg = error(p);
  EXPECT_NE(msg.find("the Sequence post-processor has no \"processors\" list"),
            std::string::npos)
      << msg;

  p = write([](json &j) {
    j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Metaspace"}};
  });
  msg = error(p);
  EXPECT_NE(msg.find("unsupported pre-tokenizer type \"Metaspace\""),
            std::string::npos)
      << msg;

  p = write([](json &j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; });
  EXPECT_NE(error(p).find("\"Whitespace\""), std::string::npos);

  p = write([](json &j) {
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  });
  msg = error(p);
  EXPECT_NE(msg.find("cannot compile the regex \"(unclosed\""),
            std::string::npos)
      << msg;
}

TEST_F(BpeTokenizerErrors, BrokenMergesAndConfig) {
  std::string p = write([](json &j) {
    j["model"]["merges"].push_back({"Ġ", "not-a-token"});
  });
  std::string msg = error(p);
  EXPECT_NE(msg.find("\"not-a-token\", which is not in the vocabulary"),
            std::string::npos)
      << msg;

  p = write([](json &) {});
  std::string config = writeText("tokenizer_config.json",
                                 "{\"eos_token\": \"<|no such token|>\"}");
  msg = error(p, config);
  EXPECT_NE(msg.find("'" + config + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"<|no such token|>\" is not a token"), std::string::npos)
      << msg;

  config = writeText("tokenizer_config.json", "{,}");
  msg = error(p, config);
  EXPECT_NE(msg.find("tokenizer config '" + config + "' is malformed json"),
            std::string::npos)
      << msg;
}

// Ids index a table, so a corrupt one must be an error, not gigabytes.
TEST_F(BpeTokenizerErrors, IdsOutOfRange) {
  for (int64_t id : {int64_t(-1), int64_t(2000000000)}) {
    std::string p = write([&](json &j) { j["model"]["vocab"]["Ġ"] = id; });
    std::string msg = error(p);
    EXPECT_NE(msg.find("'" + p + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("vocabulary token \"Ġ\" has id " + std::to_string(id) +
                       ", out of range"),
              std::string::npos)
        << msg;
  }
}

// A non-integer id is refused as the library refuses it, and so is json
// nested deeper than the library reads (it crashed the stack).
TEST_F(BpeTokenizerErrors, NonIntegerIdsAndDeepNesting) {
  std::string p = write([](json &j) { j["model"]["vocab"]["Ġ"] = 1.5; });
  std::string msg = error(p);
  EXPECT_NE(msg.find("vocabulary token \"Ġ\" has id 1.5, not an integer"),
            std::string::npos)
      << msg;
  std::string deep;
  for (int i = 0; i < 100000; ++i)
    deep += "{\"type\":\"Sequence\",\"pretokenizers\":[";
  for (int i = 0; i < 100000; ++i)
    deep += "]}";
  p = writeText("tokenizer.json",
                "{\"model\":{},\"pre_tokenizer\":" + deep + "}");
  msg = error(p);
  EXPECT_NE(msg.find("'" + p + "' nests json deeper than 128 levels"),
            std::string::npos)
      << msg;
}

// A tokenizer file of another name loads with the config beside it.
TEST_F(BpeTokenizerErrors, AJsonOfAnotherNameLoadsWithItsConfig) {
  std::string p = write([](json &) {});
  fs::rename(p, dir / "my_tok.json");
  writeText("tokenizer_config.json",
            "{\"pad_token\": \"<|end_of_text|>\", \"eos_token\": "
            "\"<|eot_id|>\"}");
  std::unique_ptr<TextTokenizer> t =
      loadTokenizer((dir / "my_tok.json").string());
  EXPECT_EQ(t->pad(), addedId("llama3", "<|end_of_text|>"));
  EXPECT_EQ(t->eos(), addedId("llama3", "<|eot_id|>"));
  std::string absent = (dir / "absent.json").string();
  try {
    loadTokenizer(absent);
    ADD_FAILURE() << "an absent file loaded";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("'" + absent + "'"), std::string::npos)
        << e.what();
  }
}

// An added token that reuses a vocabulary id (the library gives "é" the id
// of its byte when added to a byte-level vocabulary) decodes as that
// vocabulary token, so BPE output holding the id decodes back.
TEST_F(BpeTokenizerErrors, AddedTokensSharingAVocabularyIdDecodeAsIt) {
  json j = readJson(fs::path(fixtures()) / "gpt2" / "tokenizer.json");
  const int64_t id = j["model"]["vocab"]["Ġ"];
  j["added_tokens"].push_back({{"id", id},
                               {"content", "Ġ"},
                               {"single_word", false},
                               {"lstrip", false},
                               {"rstrip", false},
                               {"normalized", true},
                               {"special", false}});
  std::string p = writeText("tokenizer.json", j.dump());
  BpeTokenizer tok(p);
  for (std::string text : {"a x y", "a  b"}) {
    std::vector<int64_t> ids = tok.encode(text, false);
    EXPECT_EQ(tok.decode(ids), text) << testing::PrintToString(ids);
  }
}

TEST(BpeTokenizer, RejectsTextThatIsNotUtf8) {
  auto tok = BpeTokenizer::fromDirectory(fixtures() + "/gpt2");
  for (std::string bad : {"ab\xff", "\xC0\xAF", "\xED\xA0\x80", "\xE2\x82"}) {
    try {
      tok->encode(bad, false);
      ADD_FAILURE() << printable(bad) << " was accepted";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("not valid utf-8"),
                std::string::npos);
    }
  }
}

} // namespace
