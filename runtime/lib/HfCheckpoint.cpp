//===- HfCheckpoint.cpp - Hugging Face checkpoint directories -------------===//

#include "rlhf/runtime/HfCheckpoint.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Files.h"
#include "rlhf/runtime/SafeTensors.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace rlhf;
using nlohmann::json;
namespace fs = std::filesystem;

bool rlhf::isHfCheckpoint(const std::string &path) {
  return fs::is_directory(path) && fs::exists(fs::path(path) / "config.json");
}

namespace {

/// The shard files of `dir`: the index's, or the single model.safetensors.
std::vector<fs::path> shardFiles(const fs::path &dir) {
  fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index)) {
    if (fs::exists(dir / "model.safetensors"))
      return {dir / "model.safetensors"};
    throw Error(
        "checkpoint '" + dir.string() +
        "' has neither model.safetensors nor model.safetensors.index.json" +
        (fs::exists(dir / "pytorch_model.bin") ||
                 fs::exists(dir / "pytorch_model.bin.index.json")
             ? "; it has pytorch_model.bin, which rlhfc does not read: "
               "convert it with transformers (from_pretrained, then "
               "save_pretrained(dir, safe_serialization=True))"
             : ""));
  }
  std::ifstream in(index);
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.contains("weight_map") ||
      !j["weight_map"].is_object())
    throw Error("malformed '" + index.string() +
                "': expected an object with a \"weight_map\"");
  std::set<std::string> files;
  for (auto &[name, file] : j["weight_map"].items()) {
    if (!file.is_string())
      throw Error("malformed '" + index.string() + "': the shard of '" + name +
                  "' is not a file name");
    files.insert(file.get<std::string>());
  }
  std::vector<fs::path> out;
  for (const std::string &f : files) {
    if (!fs::exists(dir / f))
      throw Error("'" + index.string() + "' names shard '" + f +
                  "', which does not exist");
    out.push_back(dir / f);
  }
  return out;
}

std::string shapeText(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

} // namespace

ParamMap rlhf::loadHfWeights(const std::string &dirName,
                             const ModelShape &shape) {
  fs::path dir(dirName);
  ParamMap all;
  std::map<std::string, std::string> fileOf;
  for (const fs::path &f : shardFiles(dir))
    for (auto &[name, t] : loadSafetensors(f.string())) {
      fileOf[name] = f.filename().string();
      all[name] = std::move(t);
    }
  ParamMap out;
  for (const ParamSpec &p : llamaParams(shape)) {
    auto it = all.find(p.name);
    if (it == all.end())
      throw Error("checkpoint '" + dirName + "' lacks tensor '" + p.name +
                  "' (is config.json the checkpoint's own?)");
    std::vector<int64_t> want = p.vector()
                                    ? std::vector<int64_t>{p.rows}
                                    : std::vector<int64_t>{p.rows, p.cols};
    if (it->second.sizes().vec() != want)
      throw Error("checkpoint '" + dirName + "': tensor '" + p.name + "' in " +
                  fileOf[p.name] + " has shape " +
                  shapeText(it->second.sizes()) + " but config.json implies " +
                  shapeText(want));
    out[p.name] = std::move(it->second);
  }
  // Tensors the model does not load (more layers than the declaration
  // keeps, a classifier head): said, as transformers says it, not dropped
  // silently. Rotary tables are buffers some checkpoints carry.
  std::vector<std::string> unused;
  for (auto &[name, t] : all)
    if (t.defined() && name.find("rotary_emb.inv_freq") == std::string::npos)
      unused.push_back(name);
  if (!unused.empty()) {
    std::string some;
    for (size_t i = 0; i < unused.size() && i < 3; ++i)
      some += (i ? ", " : "") + unused[i];
    std::fprintf(stderr,
                 "warning: checkpoint '%s' has %zu tensor%s the model does "
                 "not load (%s%s): the .rlhf declaration keeps less than "
                 "its config.json, or it holds other weights\n",
                 dirName.c_str(), unused.size(), unused.size() == 1 ? "" : "s",
                 some.c_str(), unused.size() > 3 ? ", ..." : "");
  }
  return out;
}

void rlhf::saveHfCheckpoint(const std::string &dirName, const HfArch &arch,
                            const ParamMap &full, int64_t maxShardBytes,
                            bool bf16, const std::string &tokenizerDir) {
  fs::path dir(dirName);
  fs::create_directories(dir);
  writeTextFile((dir / "config.json").string(), writeHfConfig(arch, bf16));
  // Shards in parameter order, each up to maxShardBytes.
  const int64_t elemBytes = bf16 ? 2 : 4;
  std::vector<ParamMap> shards(1);
  int64_t bytes = 0;
  for (const ParamSpec &p : llamaParams(arch.shape)) {
    const at::Tensor &t = full.at(p.name);
    int64_t b = t.numel() * elemBytes;
    if (bytes > 0 && bytes + b > maxShardBytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back()[p.name] = t.to(at::kFloat).contiguous();
    bytes += b;
  }
  std::map<std::string, std::string> metadata{{"format", "pt"}};
  if (shards.size() == 1) {
    saveSafetensors((dir / "model.safetensors").string(), shards[0], metadata,
                    bf16);
  } else {
    json map = json::object();
    int64_t total = 0;
    for (size_t i = 0; i < shards.size(); ++i) {
      char name[64];
      std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors",
                    i + 1, shards.size());
      saveSafetensors((dir / name).string(), shards[i], metadata, bf16);
      for (auto &[n, t] : shards[i]) {
        map[n] = name;
        total += t.numel() * elemBytes;
      }
    }
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
    writeTextFile((dir / "model.safetensors.index.json").string(),
                  index.dump(2));
  }
  if (!tokenizerDir.empty())
    for (const char *f : {"tokenizer.json", "tokenizer_config.json",
                          "special_tokens_map.json", "tokenizer.model"})
      if (fs::exists(fs::path(tokenizerDir) / f))
        fs::copy_file(fs::path(tokenizerDir) / f, dir / f,
                      fs::copy_options::overwrite_existing);
}
