//===- HfConfig.cpp - Hugging Face config.json of LLaMA-family models -----===//

#include "rlhf/runtime/HfConfig.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace rlhf;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// The families whose decoder is LLaMA's: RMSNorm, rotary attention with
/// grouped-query heads, SwiGLU. Qwen2 adds biases to q, k and v.
bool supported(const std::string &type) {
  return type == "llama" || type == "mistral" || type == "qwen2";
}

struct Reader {
  const json &j;
  HfConfigError &error;
  std::string file;

  bool fail(const std::string &key, const std::string &what) {
    if (error.message.empty())
      error = {file + ": " + what, key};
    return false;
  }
  bool integer(const char *key, int64_t &out, bool required = true) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null())
      return !required || fail(key, std::string("missing key \"") + key + "\"");
    if (!it->is_number_integer() || it->get<int64_t>() <= 0)
      return fail(key,
                  std::string("\"") + key + "\" must be a positive integer");
    out = it->get<int64_t>();
    return true;
  }
  /// A positive number: every one read here (rope bases and factors, the
  /// norm's epsilon) is a scale or a length, and 0 or less would give NaNs
  /// rather than an error.
  bool number(const json &obj, const char *key, double &out,
              bool required = false) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null())
      return !required || fail(key, std::string("missing key \"") + key + "\"");
    if (!it->is_number() || !(it->get<double>() > 0))
      return fail(key,
                  std::string("\"") + key + "\" must be a positive number");
    out = it->get<double>();
    return true;
  }
  bool flag(const char *key, bool &out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null())
      return true;
    if (!it->is_boolean())
      return fail(key, std::string("\"") + key + "\" must be true or false");
    out = it->get<bool>();
    return true;
  }
};

} // namespace

std::optional<HfArch> rlhf::readHfConfig(const std::string &dir,
                                         HfConfigError &error) {
  fs::path path(dir);
  if (path.extension() != ".json")
    path /= "config.json";
  std::ifstream in(path);
  if (!in) {
    error = {fs::exists(dir)
                 ? "no config.json in '" + dir + "'"
                 : "checkpoint directory '" + dir + "' does not exist",
             ""};
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  const std::string file = path.string();
  if (j.is_discarded() || !j.is_object()) {
    error = {file + ": malformed JSON (not a JSON object)", ""};
    return std::nullopt;
  }
  Reader r{j, error, file};
  HfArch a;
  a.source = ss.str();
  auto type = j.find("model_type");
  if (type == j.end() || !type->is_string()) {
    r.fail("model_type", "missing key \"model_type\"");
    return std::nullopt;
  }
  a.modelType = type->get<std::string>();
  if (!supported(a.modelType)) {
    r.fail("model_type", "unsupported model_type \"" + a.modelType +
                             "\"; rlhfc supports llama, mistral and qwen2");
    return std::nullopt;
  }
  ModelShape &s = a.shape;
  bool ok = r.integer("num_hidden_layers", s.layers) &&
            r.integer("hidden_size", s.hidden) &&
            r.integer("num_attention_heads", s.heads) &&
            r.integer("intermediate_size", s.ffn) &&
            r.integer("vocab_size", s.vocab) &&
            r.integer("max_position_embeddings", a.maxPositions);
  s.kvHeads = s.heads;
  ok = ok && r.integer("num_key_value_heads", s.kvHeads, false);
  int64_t headDim = 0;
  ok = ok && r.integer("head_dim", headDim, false);
  ok = ok && r.flag("tie_word_embeddings", s.tieEmbeddings);
  bool bias = a.modelType == "qwen2"; // Qwen2's q/k/v always have biases
  ok = ok && r.flag("attention_bias", bias);
  s.qkvBias = bias;
  ok = ok && r.number(j, "rope_theta", a.ropeTheta) &&
       r.number(j, "rms_norm_eps", a.normEps);
  if (!ok)
    return std::nullopt;
  if (s.hidden % s.heads != 0 || s.heads % s.kvHeads != 0) {
    r.fail("num_attention_heads",
           "num_attention_heads must divide hidden_size and be a multiple "
           "of num_key_value_heads");
    return std::nullopt;
  }
  if (headDim && headDim != s.hidden / s.heads) {
    r.fail("head_dim", "head_dim " + std::to_string(headDim) +
                           " differs from hidden_size / num_attention_heads; "
                           "rlhfc's decoder needs them equal");
    return std::nullopt;
  }
  if (bool mlpBias = false; r.flag("mlp_bias", mlpBias) && mlpBias) {
    r.fail("mlp_bias", "mlp_bias is not supported");
    return std::nullopt;
  }
  if (auto act = j.find("hidden_act");
      act != j.end() && !(act->is_string() && *act == "silu")) {
    r.fail("hidden_act", "hidden_act must be \"silu\" (SwiGLU)");
    return std::nullopt;
  }
  if (auto sw = j.find("sliding_window"); sw != j.end() && !sw->is_null()) {
    int64_t window = 0;
    if (!r.integer("sliding_window", window))
      return std::nullopt;
    // Qwen2 configs name a window but use it only when asked to.
    bool used = a.modelType != "qwen2";
    if (a.modelType == "qwen2" && !r.flag("use_sliding_window", used))
      return std::nullopt;
    if (used && window < a.maxPositions)
      a.slidingWindow = window;
  }
  if (auto rs = j.find("rope_scaling"); rs != j.end() && !rs->is_null()) {
    // value() throws on a mistyped entry, and the compiler that calls this
    // has no handler: check the types first.
    if (!rs->is_object()) {
      r.fail("rope_scaling", "\"rope_scaling\" must be an object or null");
      return std::nullopt;
    }
    auto type = rs->find("rope_type");
    if (type == rs->end())
      type = rs->find("type");
    std::string kind =
        type != rs->end() && type->is_string() ? type->get<std::string>() : "";
    if (kind != "llama3") {
      r.fail("rope_scaling", "unsupported rope_scaling type \"" + kind +
                                 "\"; rlhfc supports \"llama3\"");
      return std::nullopt;
    }
    double orig = 0;
    if (!(r.number(*rs, "factor", a.rope.factor, true) &&
          r.number(*rs, "low_freq_factor", a.rope.lowFreqFactor, true) &&
          r.number(*rs, "high_freq_factor", a.rope.highFreqFactor, true) &&
          r.number(*rs, "original_max_position_embeddings", orig, true)))
      return std::nullopt;
    if (orig != double(int64_t(orig))) {
      r.fail("rope_scaling", "\"original_max_position_embeddings\" must be "
                             "a whole number");
      return std::nullopt;
    }
    a.rope.originalMaxPositions = int64_t(orig);
  }
  return a;
}

std::string rlhf::writeHfConfig(const HfArch &a, bool bf16) {
  const ModelShape &s = a.shape;
  static const std::map<std::string, std::string> kArch = {
      {"llama", "LlamaForCausalLM"},
      {"mistral", "MistralForCausalLM"},
      {"qwen2", "Qwen2ForCausalLM"}};
  std::string type = a.modelType.empty() ? "llama" : a.modelType;
  json j = json::parse(a.source, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object())
    j = json::object();
  const char *dtype = bf16 ? "bfloat16" : "float32";
  json set = {{"architectures",
               {kArch.count(type) ? kArch.at(type) : "LlamaForCausalLM"}},
              {"model_type", type},
              {"num_hidden_layers", s.layers},
              {"hidden_size", s.hidden},
              {"num_attention_heads", s.heads},
              {"num_key_value_heads", s.kvHeads},
              {"head_dim", s.hidden / s.heads},
              {"intermediate_size", s.ffn},
              {"vocab_size", s.vocab},
              {"max_position_embeddings", a.maxPositions},
              {"rope_theta", a.ropeTheta},
              {"rms_norm_eps", a.normEps},
              {"tie_word_embeddings", s.tieEmbeddings},
              {"hidden_act", "silu"},
              {"torch_dtype", dtype}};
  j.update(set);
  // transformers >= 4.56 writes "dtype" and reads it first.
  if (j.contains("dtype"))
    j["dtype"] = dtype;
  if (type == "llama")
    j["attention_bias"] = s.qkvBias;
  if (a.slidingWindow)
    j["sliding_window"] = a.slidingWindow;
  else if (type != "llama" && !j.contains("sliding_window"))
    j["sliding_window"] = nullptr;
  if (a.rope.enabled())
    j["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", a.rope.factor},
        {"low_freq_factor", a.rope.lowFreqFactor},
        {"high_freq_factor", a.rope.highFreqFactor},
        {"original_max_position_embeddings", a.rope.originalMaxPositions}};
  else
    j.erase("rope_scaling");
  // An imported checkpoint's ids stand (LLaMA-3 lists several eos ids).
  for (auto [key, id] :
       {std::pair{"bos_token_id", a.bosId}, std::pair{"eos_token_id", a.eosId},
        std::pair{"pad_token_id", a.padId}})
    if (id >= 0 && (!j.contains(key) || j[key].is_null()))
      j[key] = id;
  return j.dump(2) + "\n";
}
