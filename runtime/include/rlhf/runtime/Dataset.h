//===- Dataset.h - JSONL prompt datasets ------------------------*- C++ -*-===//

#ifndef RLHF_RUNTIME_DATASET_H
#define RLHF_RUNTIME_DATASET_H

#include <map>
#include <string>
#include <vector>

namespace rlhf {

/// One example: field name -> text.
using Example = std::map<std::string, std::string>;

/// A JSONL file of objects with string fields. Every line is validated when
/// the file is opened; an invalid line is an rlhf::Error "path:line: what".
class JsonlDataset {
public:
  JsonlDataset(const std::string &path, const std::vector<std::string> &fields);

  size_t size() const { return rows.size(); }
  const Example &operator[](size_t i) const { return rows[i]; }

  /// The `batch` examples of training step `step`: epochs walk a seeded
  /// permutation, so a resumed run sees exactly the batches it would have.
  std::vector<Example> batch(int64_t step, int64_t batch, uint64_t seed) const;

private:
  std::vector<Example> rows;
};

} // namespace rlhf

#endif // RLHF_RUNTIME_DATASET_H
