//===- Dataset.cpp - JSONL prompt datasets --------------------------------===//

#include "rlhf/runtime/Dataset.h"
#include "rlhf/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>

using namespace rlhf;

JsonlDataset::JsonlDataset(const std::string &path, const std::vector<std::string> &fields) {
  std::ifstream in(path);
  if (!in)
    throw Error("cannot open dataset '" + path + "': " + std::strerror(errno));
  std::string line;
  for (int64_t lineNo = 1; std::getline(in, line); ++lineNo) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    auto where = path + ":" + std::to_string(lineNo) + ": ";
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded())
      throw Error(where + "not a JSON object; each line must be one object such as "
                          "{\"prompt\": \"...\"}");
    if (!j.is_object())
      throw Error(where + "expected a JSON object, got " + std::string(j.type_name()));
    Example ex;
    for (const std::string &f : fields) {
      auto it = j.find(f);
      if (it == j.end())
        throw Error(where + "missing field \"" + f + "\"");
      if (it->is_string())
        ex[f] = it->get<std::string>();
      else if (it->is_number())
        ex[f] = it->dump();
      else
        throw Error(where + "field \"" + f + "\" must be a string or a number, got " +
                    std::string(it->type_name()));
    }
    rows.push_back(std::move(ex));
  }
  if (rows.empty())
    throw Error("dataset '" + path + "' has no examples");
}

std::vector<Example> JsonlDataset::batch(int64_t step, int64_t n, uint64_t seed) const {
  std::vector<Example> out;
  const int64_t size = int64_t(rows.size());
  int64_t start = step * n;
  for (int64_t i = start; i < start + n; ++i) {
    int64_t epoch = i / size, pos = i % size;
    std::vector<int64_t> perm(size);
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937_64 rng(seed * 1000003ull + uint64_t(epoch));
    std::shuffle(perm.begin(), perm.end(), rng);
    out.push_back(rows[perm[pos]]);
  }
  return out;
}
