//===- Properties.cpp - the properties of each declaration ----------------===//

#include "rlhfc/Frontend/Properties.h"

#include <iterator>

using namespace rlhfc;

std::vector<PropSpec> rlhfc::declarationProps(llvm::StringRef keyword) {
  auto of = [](llvm::ArrayRef<PropSpec> a) {
    return std::vector<PropSpec>(a.begin(), a.end());
  };
  if (keyword == "hardware")
    return of(kHardwareProps);
  if (keyword == "arch")
    return of(kArchProps);
  if (keyword == "cluster")
    return of(kClusterProps);
  if (keyword == "dataset")
    return of(kDatasetProps);
  if (keyword == "run")
    return of(kRunProps);
  if (keyword == "model") { // its own first: what a model usually sets
    std::vector<PropSpec> all = of(kModelOnlyProps);
    all.insert(all.end(), std::begin(kArchProps), std::end(kArchProps));
    return all;
  }
  return {};
}
