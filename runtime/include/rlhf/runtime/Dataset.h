//===- Dataset.h - JSONL prompt datasets ------------------------*- C++ -*-===//

#ifndef RLHF_RUNTIME_DATASET_H
#define RLHF_RUNTIME_DATASET_H

#include "rlhf/runtime/PromptTemplate.h"

#include <map>
#include <string>
#include <vector>

namespace rlhf {

/// One example: field name -> text.
using Example = std::map<std::string, std::string>;

/// A dataset's prompt template: text with `{column}` placeholders, and `{{`
/// and `}}` for literal braces.
class PromptTemplate {
public:
  /// Throws rlhf::Error for malformed text (rlhfc checks templates first).
  explicit PromptTemplate(const std::string &text);

  /// The columns its placeholders name, each once, in order of first use.
  const std::vector<std::string> &columns() const { return cols; }

  /// The template filled in from `row`; throws rlhf::Error naming a column
  /// the row lacks.
  std::string render(const Example &row) const;

private:
  struct Piece {
    std::string text; ///< literal text, or the column to put here
    bool column = false;
  };
  std::vector<Piece> pieces;
  std::vector<std::string> cols;
};

/// A JSONL file of objects with string fields. Every line is validated when
/// the file is opened; an invalid line is an rlhf::Error "path:line: what".
class JsonlDataset {
public:
  /// Reads `fields` of every row. With `tmpl`, `prompt` is instead the
  /// template rendered from the row: the columns the template names are
  /// read too, and a row without one is an error naming its line.
  JsonlDataset(const std::string &path, const std::vector<std::string> &fields,
               const PromptTemplate *tmpl = nullptr);

  size_t size() const { return examples.size(); }
  const Example &operator[](size_t i) const { return examples[i]; }
  /// Row i's `data_source` (verl's column naming the benchmark a row comes
  /// from; a field or not), or "": evaluation reports each source apart.
  const std::string &source(size_t i) const { return sources[i]; }

  /// The `batch` examples of training step `step`: epochs walk a seeded
  /// permutation, so a resumed run sees exactly the batches it would have.
  std::vector<Example> batch(int64_t step, int64_t batch, uint64_t seed) const {
    return rows(step * batch, batch, seed);
  }
  /// The `n` examples from position `start` of that walk.
  std::vector<Example> rows(int64_t start, int64_t n, uint64_t seed) const;

private:
  std::vector<Example> examples;
  std::vector<std::string> sources;
};

} // namespace rlhf

#endif // RLHF_RUNTIME_DATASET_H
