//===- SafeTensorsTest.cpp - weights files and the tokenizer --------------===//

#include "rlhf/runtime/SafeTensors.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Files.h"
#include "rlhf/runtime/Tokenizer.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <typeinfo>

using namespace rlhf;

namespace {

std::string tmpPath(const std::string &name) {
  return std::string(::testing::TempDir()) + "/rlhf-" + name;
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string header(const std::string &json) {
  std::string s(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i)
    s[i] = char((n >> (8 * i)) & 0xff);
  return s + json;
}

TEST(SafeTensors, RoundTripsHuggingFaceNamedTensors) {
  ModelConfig cfg;
  cfg.shape = ModelShape{2, 64, 4, 2, 176, 512, false, false};
  ParamMap p = initParams(cfg, 1);
  std::string path = tmpPath("model.safetensors");
  saveSafetensors(path, p, {{"format", "pt"}});
  ParamMap q = loadSafetensors(path);
  ASSERT_EQ(q.size(), p.size());
  for (auto &[n, t] : p)
    EXPECT_TRUE(at::equal(t, q.at(n))) << n;
  EXPECT_TRUE(q.count("model.layers.1.self_attn.k_proj.weight"));
  // bf16 storage rounds to bf16 and reads back as fp32.
  saveSafetensors(path, p, {}, /*bf16=*/true);
  ParamMap r = loadSafetensors(path);
  const at::Tensor &w = p.at("lm_head.weight");
  EXPECT_TRUE(
      at::equal(r.at("lm_head.weight"), w.to(at::kBFloat16).to(at::kFloat)));
}

// Token ids and masks (the samples an asynchronous generator made ahead,
// in checkpoints) keep their type: I64 and BOOL entries.
TEST(SafeTensors, KeepsTokenIdsAndMasks) {
  std::string path = tmpPath("ahead.safetensors");
  ParamMap p;
  p["seq"] = at::arange(1 << 20, (1 << 20) + 12, at::kLong).view({3, 4});
  p["mask"] =
      at::tensor({1, 0, 1, 1, 0, 0}, at::kLong).to(at::kBool).view({2, 3});
  p["logprobs"] = at::randn({2, 3});
  saveSafetensors(path, p);
  ParamMap q = loadSafetensors(path);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q.at("seq").scalar_type(), at::kLong);
  EXPECT_EQ(q.at("mask").scalar_type(), at::kBool);
  for (auto &[n, t] : p)
    EXPECT_TRUE(at::equal(t, q.at(n))) << n;
}

TEST(SafeTensors, MalformedFilesAreClearErrors) {
  std::string path = tmpPath("bad.safetensors");
  auto expectError = [&](const std::string &bytes, const std::string &want) {
    writeBytes(path, bytes);
    try {
      loadSafetensors(path);
      ADD_FAILURE() << "expected an error containing: " << want;
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos)
          << e.what();
    }
  };
  expectError("abc", "shorter than the 8-byte header length");
  std::string big(8, '\0');
  big[7] = 0x7f;
  expectError(big + "{}", "exceeds the file size");
  expectError(header("{not json"), "header is not valid JSON");
  expectError(
      header(
          "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}") +
          std::string(12, '\0'),
      "data_offsets that do not match its shape");
  expectError(
      header(
          "{\"w\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]}}") +
          std::string(2, '\0'),
      "unsupported dtype I8");
  expectError(header("{\"w\":{\"shape\":[2]}}"),
              "lacks dtype, shape or data_offsets");
  EXPECT_THROW(loadSafetensors(tmpPath("does-not-exist.safetensors")), Error);
}

// A weights file a user hands over may be cut short or corrupt. Every
// truncation of a valid file, thousands of corrupted headers and headers
// with the wrong JSON types or sizes that overflow must load (a mutation
// may stay valid) or be an rlhf::Error naming the file: never another
// exception, a crash, or an allocation the file does not back.
TEST(SafeTensors, CorruptFilesAreErrorsNamingTheFile) {
  const std::string good = tmpPath("good.safetensors");
  saveSafetensors(good,
                  {{"w", at::randn({3, 4})},
                   {"ids", at::arange(5)},
                   {"mask", at::ones({2}, at::kBool)}},
                  {{"format", "pt"}}, /*bf16=*/false);
  std::ifstream in(good, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  const std::string path = tmpPath("corrupt.safetensors");
  int errors = 0, loads = 0;
  auto check = [&](const std::string &b, const std::string &what,
                   bool mustFail) {
    writeBytes(path, b);
    try {
      loadSafetensors(path);
      ++loads;
      EXPECT_FALSE(mustFail) << what << " loaded";
    } catch (const Error &e) {
      ++errors;
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos)
          << what << ": " << e.what();
    } catch (const std::exception &e) {
      ADD_FAILURE() << what << ": " << typeid(e).name() << ": " << e.what();
    }
  };
  for (size_t n = 0; n < bytes.size(); ++n)
    check(bytes.substr(0, n), "truncated to " + std::to_string(n), true);
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | uint8_t(bytes[size_t(i)]);
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string b = bytes;
    for (int f = 0; f <= i % 3; ++f)
      b[8 + rng() % headerBytes] = char(rng());
    check(b, "corrupt header #" + std::to_string(i), false);
  }
  EXPECT_GT(errors, 3000);
  for (
      const char *h : {
          R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})",
          R"({"w":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})",
          R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,"8"]}})",
          R"({"w":{"dtype":"F32","shape":[2],"data_offsets":{"a":0}}})",
          R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})",
          R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8.5]}})",
          R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})",
          R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,16]}})",
          // Products that overflow 64 bits to what the offsets say.
          R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
          R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})",
          R"({"w":{"dtype":"BF16","shape":[9223372036854775807,2],"data_offsets":[0,4]}})",
          R"({"w":[1,2]})",
          R"([1,2])",
      })
    check(header(h) + std::string(8, '\0'), h, true);
  // An empty tensor may have huge dimensions beside a zero.
  check(
      header(
          R"({"w":{"dtype":"F32","shape":[1099511627776,0,1099511627776],"data_offsets":[0,0]}})"),
      "empty", false);
}

TEST(Tokenizer, TrainsLoadsAndRoundTrips) {
#ifndef RLHF_HAVE_SPM
  GTEST_SKIP() << "this runtime was built without sentencepiece";
#endif
  std::string corpus = tmpPath("corpus.txt"), prefix = tmpPath("spm");
  {
    std::ofstream out(corpus);
    for (int a = 0; a < 40; ++a)
      out << a << " plus " << (a * 7) % 40 << " equals " << a + (a * 7) % 40
          << "\n";
  }
  std::string cmd =
      "spm_train --input=" + corpus + " --model_prefix=" + prefix +
      " --vocab_size=64 --model_type=bpe --character_coverage=1.0 "
      "--pad_id=3 > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  Tokenizer tok(prefix + ".model");
  EXPECT_EQ(tok.vocabSize(), 64);
  std::vector<int64_t> ids = tok.encode("12 plus 5 equals 17");
  EXPECT_EQ(ids.front(), tok.bos());
  EXPECT_EQ(tok.decode(ids), "12 plus 5 equals 17");
  EXPECT_EQ(tok.pad(), 3);
  // Text with a NUL byte is not cut there, either way: with byte pieces
  // (LLaMA's byte_fallback) it round-trips.
  std::string fallback = tmpPath("spm-bytes");
  cmd = "spm_train --input=" + corpus + " --model_prefix=" + fallback +
        " --vocab_size=300 --hard_vocab_limit=false --model_type=bpe "
        "--character_coverage=1.0 --byte_fallback=true --pad_id=3 > "
        "/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  Tokenizer bytes(fallback + ".model");
  const std::string nul("1 plus\0 2", 9);
  std::vector<int64_t> withNul = bytes.encode(nul, false);
  EXPECT_EQ(withNul.size(), bytes.encode("1 plus", false).size() + 2);
  EXPECT_EQ(bytes.decode(withNul), nul);
}

TEST(Tokenizer, MissingModelIsAClearError) {
  try {
    Tokenizer t(tmpPath("nope.model"));
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos);
  }
}

} // namespace

#include "rlhf/runtime/Dataset.h"

namespace {

TEST(Dataset, BatchesAreSeededAndResumable) {
  std::string path = tmpPath("sums.jsonl");
  {
    std::ofstream out(path);
    for (int i = 0; i < 10; ++i)
      out << "{\"prompt\": \"" << i << "+1=\", \"answer\": " << i + 1 << "}\n";
  }
  rlhf::JsonlDataset ds(path, {"prompt", "answer"});
  EXPECT_EQ(ds.size(), 10u);
  EXPECT_EQ(ds[3].at("answer"), "4");
  auto a = ds.batch(7, 4, 1), b = ds.batch(7, 4, 1), c = ds.batch(7, 4, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // One epoch visits every example once.
  std::set<std::string> seen;
  for (int s = 0; s < 5; ++s)
    for (auto &ex : ds.batch(s, 2, 9))
      seen.insert(ex.at("prompt"));
  EXPECT_EQ(seen.size(), 10u);
  // Rows from any position (dynamic sampling's rounds of gen_batch) walk
  // the same order as batches, across an epoch's end too.
  std::vector<rlhf::Example> walk;
  for (int s = 0; s < 6; ++s)
    for (auto &ex : ds.batch(s, 3, 9))
      walk.push_back(ex);
  auto span = ds.rows(7, 8, 9);
  ASSERT_EQ(span.size(), 8u);
  EXPECT_TRUE(std::equal(span.begin(), span.end(), walk.begin() + 7));
}

TEST(Dataset, LabelsAreBoolsOrNumbers) {
  std::string path = tmpPath("l.jsonl");
  std::ofstream(path) << "{\"prompt\": \"a\", \"completion\": \"b\", "
                         "\"label\": true}\n"
                         "{\"prompt\": \"a\", \"completion\": \"b\", "
                         "\"label\": false}\n"
                         "{\"prompt\": \"a\", \"completion\": \"b\", "
                         "\"label\": 2.5}\n";
  // kl_completion is made, not read: the rows have no such column.
  rlhf::JsonlDataset ds(path,
                        {"prompt", "completion", "label", "kl_completion"});
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds[0].at("label"), "1");
  EXPECT_EQ(ds[1].at("label"), "0");
  EXPECT_EQ(ds[2].at("label"), "2.5");
  std::ofstream(path) << "{\"prompt\": \"a\", \"completion\": \"b\", "
                         "\"label\": true}\n"
                         "{\"prompt\": \"a\", \"completion\": \"b\", "
                         "\"label\": \"yes\"}\n";
  try {
    rlhf::JsonlDataset bad(path, {"prompt", "completion", "label"});
    ADD_FAILURE() << "a string label was read";
  } catch (const rlhf::Error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "l.jsonl:2: field \"label\" must be true, false or a "
                  "number, got \"yes\""),
              std::string::npos)
        << e.what();
  }
}

TEST(Dataset, BadLinesNameTheLine) {
  auto expectError = [&](const std::string &text, const std::string &want) {
    std::string path = tmpPath("bad.jsonl");
    std::ofstream(path) << text;
    try {
      rlhf::JsonlDataset ds(path, {"prompt"});
      ADD_FAILURE() << "expected: " << want;
    } catch (const rlhf::Error &e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos)
          << e.what();
    }
  };
  expectError("{\"prompt\": \"a\"}\n{\"prompt\": oops}\n",
              "bad.jsonl:2: not valid JSON (parse error at line 1, column 12");
  // Bad encodings say so, not that the line is no object.
  expectError("{\"prompt\": \"\xff\xfe bad\"}\n",
              "bad.jsonl:1: not valid JSON (parse error at line 1, column 13: "
              "syntax error while parsing value - invalid string: ill-formed "
              "UTF-8 byte");
  expectError("{\"prompt\": \"\\ud800\"}\n",
              "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF");
  expectError("{\"prompt\": \"a\"}\n\n{\"answer\": \"b\"}\n",
              "bad.jsonl:3: missing field \"prompt\"");
  expectError("[1, 2]\n", "bad.jsonl:1: expected a JSON object, got array");
  expectError("{\"prompt\": [1]}\n",
              "field \"prompt\" must be a string or a number, got array");
  expectError("", "has no examples");
}

} // namespace

// A full disk fails the write, saying so, rather than leaving an empty or
// short file behind (a checkpoint marker written so would lose the run).
TEST(SafeTensors, FullDiskIsAnErrorThatSaysWhy) {
  auto message = [](auto &&f) {
    try {
      f();
    } catch (const rlhf::Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] {
              rlhf::writeTextFile("/dev/full", "20\n");
            }).find("writing '/dev/full' failed: No space left on device"),
            std::string::npos);
  rlhf::ParamMap t{{"w", at::ones({64, 64})}};
  EXPECT_NE(message([&] {
              rlhf::saveSafetensors("/dev/full", t);
            }).find("No space left on device"),
            std::string::npos);
}
