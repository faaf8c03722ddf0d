//===- Dataset.cpp - JSONL prompt datasets --------------------------------===//

#include "rlhf/runtime/Dataset.h"
#include "rlhf/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

using namespace rlhf;

PromptTemplate::PromptTemplate(const std::string &text) {
  std::vector<TemplatePiece> parsed;
  TemplateSyntax bad = parsePromptTemplate(text, parsed);
  if (bad.kind != TemplateSyntax::Ok)
    throw Error("prompt template \"" + text + "\": " + bad.what() +
                " at offset " + std::to_string(bad.offset));
  for (TemplatePiece &p : parsed) {
    if (p.column && std::find(cols.begin(), cols.end(), p.text) == cols.end())
      cols.push_back(p.text);
    pieces.push_back({std::move(p.text), p.column});
  }
}

std::string PromptTemplate::render(const Example &row) const {
  std::string out;
  for (const Piece &p : pieces) {
    if (!p.column) {
      out += p.text;
      continue;
    }
    auto it = row.find(p.text);
    if (it == row.end())
      throw Error("missing field \"" + p.text +
                  "\", which the prompt template uses");
    out += it->second;
  }
  return out;
}

JsonlDataset::JsonlDataset(const std::string &path,
                           const std::vector<std::string> &fields,
                           const PromptTemplate *tmpl) {
  // With a template, `prompt` (or, for a dataset of whole sequences,
  // `text`) is rendered rather than read.
  const std::string target =
      std::find(fields.begin(), fields.end(), "text") != fields.end()
          ? "text"
          : "prompt";
  std::vector<std::string> read = fields;
  // Made from the rows' prompts and completions, not read.
  read.erase(std::remove(read.begin(), read.end(), "kl_completion"),
             read.end());
  size_t ownColumns = read.size();
  if (tmpl) {
    read.erase(std::remove(read.begin(), read.end(), target), read.end());
    ownColumns = read.size();
    for (const std::string &c : tmpl->columns())
      if (std::find(read.begin(), read.end(), c) == read.end())
        read.push_back(c);
  }
  // ifstream opens a directory and reads nothing from it.
  if (std::filesystem::is_directory(path))
    throw Error("dataset '" + path +
                "' is a directory; name the .jsonl file in it");
  std::ifstream in(path);
  if (!in)
    throw Error("cannot open dataset '" + path + "': " + std::strerror(errno));
  std::string line;
  for (int64_t lineNo = 1; std::getline(in, line); ++lineNo) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    auto where = path + ":" + std::to_string(lineNo) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error &e) {
      // Its message says where and why: invalid UTF-8 or a lone surrogate
      // is not a missing brace.
      std::string why = e.what();
      if (auto colon = why.find("parse error"); colon != std::string::npos)
        why = why.substr(colon);
      throw Error(where + "not valid JSON (" + why +
                  "); each line must be one object such as "
                  "{\"prompt\": \"...\"}");
    }
    if (!j.is_object())
      throw Error(where + "expected a JSON object, got " + std::string(j.type_name()));
    Example ex;
    for (size_t k = 0; k < read.size(); ++k) {
      const std::string &f = read[k];
      auto it = j.find(f);
      if (it == j.end())
        throw Error(where + "missing field \"" + f + "\"" +
                    (k < ownColumns ? ""
                                    : ", which the prompt template uses; add "
                                      "it to the row or change 'template'"));
      if (f == "label" && !it->is_boolean() && !it->is_number())
        throw Error(where +
                    "field \"label\" must be true, false or a "
                    "number, got " +
                    it->dump());
      if (f == "label")
        ex[f] = it->is_boolean() ? (it->get<bool>() ? "1" : "0") : it->dump();
      else if (it->is_string())
        ex[f] = it->get<std::string>();
      else if (it->is_number())
        ex[f] = it->dump();
      else
        throw Error(where + "field \"" + f + "\" must be a string or a number, got " +
                    std::string(it->type_name()));
    }
    if (tmpl)
      ex[target] = tmpl->render(ex);
    std::string source;
    if (auto it = j.find("data_source"); it != j.end())
      source = it->is_string()   ? it->get<std::string>()
               : it->is_number() ? it->dump()
                                 : "";
    sources.push_back(std::move(source));
    examples.push_back(std::move(ex));
  }
  if (examples.empty())
    throw Error("dataset file '" + path +
                "' has no examples; give it one JSON object per line");
}

std::vector<Example> JsonlDataset::rows(int64_t start, int64_t n,
                                        uint64_t seed) const {
  std::vector<Example> out;
  const int64_t size = int64_t(examples.size());
  std::vector<int64_t> perm;
  int64_t permEpoch = -1; // one shuffle per epoch the rows span
  for (int64_t i = start; i < start + n; ++i) {
    int64_t epoch = i / size, pos = i % size;
    if (epoch != permEpoch) {
      perm.resize(size_t(size));
      std::iota(perm.begin(), perm.end(), 0);
      std::mt19937_64 rng(seed * 1000003ull + uint64_t(epoch));
      std::shuffle(perm.begin(), perm.end(), rng);
      permEpoch = epoch;
    }
    out.push_back(examples[size_t(perm[size_t(pos)])]);
  }
  return out;
}
