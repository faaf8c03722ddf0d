//===- HfCheckpointTest.cpp - Hugging Face checkpoints against transformers
//===//
//
// Published config.json files give the published parameter counts; tiny
// random checkpoints that transformers wrote (scripts/hf-fixtures.py models,
// in $RLHF_HF_FIXTURES) load and give transformers' logits; what we export
// loads back bit for bit (and, in the hf-export-check test, in transformers).
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/HfCheckpoint.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/SafeTensors.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <ATen/core/grad_mode.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace rlhf;
namespace fs = std::filesystem;

namespace {

std::string env(const char *name) {
  const char *v = std::getenv(name);
  if (!v)
    ADD_FAILURE() << name << " is not set; run through ctest (runtime.hf-*)";
  return v ? v : "";
}

int64_t parameters(const ModelShape &s) {
  int64_t n = 0;
  for (const ParamSpec &p : llamaParams(s))
    n += p.numel();
  return n;
}

HfArch arch(const std::string &dir) {
  HfConfigError e;
  std::optional<HfArch> a = readHfConfig(dir, e);
  EXPECT_TRUE(a) << e.message;
  return a.value_or(HfArch{});
}

template <typename F> std::string errorOf(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "(no error)";
}

const char *kModels[] = {"llama2", "llama3", "mistral", "qwen2"};

} // namespace

// The published configs, read as transformers reads them: the parameter
// counts transformers gives for the same files.
TEST(HfConfig, PublishedConfigsGivePublishedParameterCounts) {
  const std::string dir = RLHF_HF_CONFIGS;
  HfArch l2 = arch(dir + "/llama2-7b");
  EXPECT_EQ(parameters(l2.shape), 6738415616);
  EXPECT_EQ(l2.shape.kvHeads, 32);
  EXPECT_FALSE(l2.rope.enabled());

  HfArch l3 = arch(dir + "/llama3.1-8b");
  EXPECT_EQ(parameters(l3.shape), 8030261248);
  EXPECT_EQ(l3.shape.kvHeads, 8);
  EXPECT_EQ(l3.ropeTheta, 500000.0);
  EXPECT_EQ(l3.rope.factor, 8.0);
  EXPECT_EQ(l3.rope.originalMaxPositions, 8192);
  EXPECT_EQ(l3.maxPositions, 131072);

  HfArch mi = arch(dir + "/mistral-7b-v0.1");
  EXPECT_EQ(parameters(mi.shape), 7241732096);
  EXPECT_EQ(mi.slidingWindow, 4096);

  HfArch qw = arch(dir + "/qwen2.5-0.5b");
  EXPECT_EQ(parameters(qw.shape), 494032768);
  EXPECT_TRUE(qw.shape.qkvBias);
  EXPECT_TRUE(qw.shape.tieEmbeddings);
  EXPECT_EQ(qw.slidingWindow, 0); // use_sliding_window is false
  EXPECT_EQ(qw.normEps, 1e-6);
}

TEST(HfConfig, BadConfigsAreNamed) {
  fs::path tmp = fs::temp_directory_path() / "rlhf-hfconfig-test";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  auto errorFor = [&](const std::string &text) {
    std::ofstream(tmp / "config.json") << text;
    HfConfigError e;
    EXPECT_FALSE(readHfConfig(tmp.string(), e));
    return e;
  };
  HfConfigError e;
  EXPECT_FALSE(readHfConfig((tmp / "nowhere").string(), e));
  EXPECT_NE(e.message.find("does not exist"), std::string::npos) << e.message;
  EXPECT_NE(errorFor("{\"model_type\": ").message.find("malformed JSON"),
            std::string::npos);
  e = errorFor("{\"model_type\": \"gpt2\"}");
  EXPECT_NE(e.message.find("unsupported model_type \"gpt2\""),
            std::string::npos)
      << e.message;
  EXPECT_EQ(e.key, "model_type");
  e = errorFor("{\"model_type\": \"llama\", \"num_hidden_layers\": 2}");
  EXPECT_NE(e.message.find("missing key \"hidden_size\""), std::string::npos)
      << e.message;
  EXPECT_EQ(e.key, "hidden_size");
  std::string base = "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, "
                     "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                     "\"intermediate_size\": 176, \"vocab_size\": 256, "
                     "\"max_position_embeddings\": 64";
  e = errorFor(base + ", \"rope_scaling\": {\"rope_type\": \"yarn\"}}");
  EXPECT_NE(e.message.find("unsupported rope_scaling type \"yarn\""),
            std::string::npos)
      << e.message;
  // Mistyped entries are errors, not exceptions (the compiler has no
  // handler for them).
  e = errorFor(base + ", \"rope_scaling\": 5}");
  EXPECT_NE(e.message.find("\"rope_scaling\" must be an object"),
            std::string::npos)
      << e.message;
  e = errorFor(base + ", \"rope_scaling\": {\"rope_type\": 3}}");
  EXPECT_NE(e.message.find("unsupported rope_scaling type \"\""),
            std::string::npos)
      << e.message;
  e = errorFor(base + ", \"hidden_size\": \"64\"}");
  EXPECT_FALSE(e.message.empty());
  // Numbers in range: a zero or negative scale would give NaNs, and a
  // window that is not a positive integer no attention mask.
  for (auto [entry, key] : std::vector<std::pair<std::string, std::string>>{
           {"\"rope_theta\": 0", "rope_theta"},
           {"\"rms_norm_eps\": -1e-6", "rms_norm_eps"},
           {"\"sliding_window\": -5", "sliding_window"},
           {"\"sliding_window\": \"4096\"", "sliding_window"},
           {"\"sliding_window\": 4096.5", "sliding_window"},
           {"\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 0, "
            "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
            "\"original_max_position_embeddings\": 8192}",
            "factor"},
           {"\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
            "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
            "\"original_max_position_embeddings\": 8192.5}",
            "rope_scaling"}}) {
    e = errorFor(base + ", " + entry + "}");
    EXPECT_EQ(e.key, key) << entry << ": " << e.message;
  }
  fs::remove_all(tmp);
}

// Our loader and decoder against transformers' fp32 logits, on every
// family: GQA, rope bases, LLaMA-3 scaling, a sharded and a bf16 file, Qwen2's
// biases and tied embeddings.
TEST(HfCheckpoint, LogitsMatchTransformers) {
  const std::string fixtures = env("RLHF_HF_FIXTURES");
  at::NoGradGuard ng;
  for (const char *name : kModels) {
    const std::string dir = fixtures + "/" + name;
    HfArch a = arch(dir);
    ModelConfig cfg = modelConfigOf(a, 64);
    LlamaModel m(cfg, loadHfWeights(dir, a.shape), {});
    ParamMap golden = loadSafetensors(dir + "/golden.safetensors");
    at::Tensor ids = golden.at("ids").to(at::kLong);
    at::Tensor logits = m.forward(ids);
    double diff = (logits - golden.at("logits")).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << name << ": logits differ from transformers'";
    std::printf("%s: logits max diff %.3g against transformers\n", name, diff);
  }
}

// What saveHfCheckpoint writes loads back bit for bit; the exports stay in
// $RLHF_HF_EXPORTS for transformers to load (runtime.hf-export-check).
TEST(HfCheckpoint, ExportRoundTrips) {
  const std::string fixtures = env("RLHF_HF_FIXTURES");
  const std::string exports = env("RLHF_HF_EXPORTS");
  for (const char *name : kModels) {
    const std::string dir = fixtures + "/" + name;
    HfArch a = arch(dir);
    ParamMap full = loadHfWeights(dir, a.shape);
    const std::string out = exports + "/" + name;
    fs::remove_all(out);
    // Small shards for LLaMA-3 (an index and several files).
    saveHfCheckpoint(out, a, full,
                     std::string(name) == "llama3" ? 65536 : 1 << 30,
                     /*bf16=*/false);
    EXPECT_EQ(fs::exists(out + "/model.safetensors.index.json"),
              std::string(name) == "llama3")
        << name;
    HfArch back = arch(out);
    EXPECT_EQ(parameters(back.shape), parameters(a.shape)) << name;
    EXPECT_EQ(back.shape.qkvBias, a.shape.qkvBias) << name;
    EXPECT_EQ(back.rope.factor, a.rope.factor) << name;
    ParamMap again = loadHfWeights(out, back.shape);
    for (auto &[n, t] : full)
      EXPECT_TRUE(at::equal(t, again.at(n))) << name << ": " << n;
    // The source's keys rlhfc does not model survive (token ids above all:
    // transformers' generate() stops on them).
    auto source = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
    auto written = nlohmann::json::parse(std::ifstream(out + "/config.json"));
    for (const char *key :
         {"bos_token_id", "eos_token_id", "initializer_range", "rope_scaling"})
      EXPECT_EQ(written.value(key, nlohmann::json()),
                source.value(key, nlohmann::json()))
          << name << ": " << key;
    EXPECT_EQ(written.value("dtype", ""), "float32") << name;
  }
}

// A bf16 export says so in config.json, and holds the weights rounded once;
// a plain arch (no source config) takes the run tokenizer's ids.
TEST(HfCheckpoint, Bf16ExportAndTokenIds) {
  const std::string dir = env("RLHF_HF_FIXTURES") + "/llama2";
  HfArch a = arch(dir);
  ParamMap full = loadHfWeights(dir, a.shape);
  fs::path out = fs::temp_directory_path() / "rlhf-hf-bf16-export";
  fs::remove_all(out);
  HfArch plain = a;
  plain.source.clear();
  plain.bosId = 5;
  plain.eosId = 6;
  plain.padId = 7;
  saveHfCheckpoint(out.string(), plain, full, 1 << 30, /*bf16=*/true);
  auto written = nlohmann::json::parse(std::ifstream(out / "config.json"));
  EXPECT_EQ(written.value("torch_dtype", ""), "bfloat16");
  EXPECT_EQ(written.value("bos_token_id", -1), 5);
  EXPECT_EQ(written.value("eos_token_id", -1), 6);
  EXPECT_EQ(written.value("pad_token_id", -1), 7);
  ParamMap again = loadHfWeights(out.string(), a.shape);
  for (auto &[n, t] : full)
    EXPECT_TRUE(at::equal(t.to(at::kBFloat16).to(at::kFloat), again.at(n)))
        << n;
  // A source config's own ids win over the tokenizer's.
  saveHfCheckpoint(
      out.string(),
      [&] {
        HfArch s = a;
        s.eosId = 99;
        return s;
      }(),
      full, 1 << 30, false);
  written = nlohmann::json::parse(std::ifstream(out / "config.json"));
  auto source = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  EXPECT_EQ(written["eos_token_id"], source["eos_token_id"]);
  fs::remove_all(out);
}

TEST(HfCheckpoint, BadWeightsAreNamed) {
  const std::string fixtures = env("RLHF_HF_FIXTURES");
  fs::path tmp = fs::temp_directory_path() / "rlhf-hfweights-test";
  fs::remove_all(tmp);
  fs::copy(fixtures + "/qwen2", tmp);
  HfArch a = arch(tmp.string());
  // A config that does not fit the weights: the first mis-shaped tensor.
  ModelShape wider = a.shape;
  wider.vocab = 300;
  EXPECT_NE(errorOf([&] { loadHfWeights(tmp.string(), wider); })
                .find("tensor 'model.embed_tokens.weight' in "
                      "model.safetensors has shape [256, 64] but config.json "
                      "implies [300, 64]"),
            std::string::npos);
  // Untied, the checkpoint lacks an lm_head.
  ModelShape untied = a.shape;
  untied.tieEmbeddings = false;
  EXPECT_NE(errorOf([&] {
              loadHfWeights(tmp.string(), untied);
            }).find("lacks tensor 'lm_head.weight'"),
            std::string::npos);
  fs::remove(tmp / "model.safetensors");
  EXPECT_NE(errorOf([&] {
              loadHfWeights(tmp.string(), a.shape);
            }).find("has neither model.safetensors nor"),
            std::string::npos);
  fs::remove_all(tmp);
}
