//===- TextTokenizer.cpp - the tokenizer a program names ------------------===//

#include "rlhf/runtime/TextTokenizer.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Tokenizer.h"
#ifdef RLHF_HAVE_BPE
#include "rlhf/runtime/BpeTokenizer.h"
#endif

#include <filesystem>

namespace fs = std::filesystem;

std::unique_ptr<rlhf::TextTokenizer>
rlhf::loadTokenizer(const std::string &path) {
  fs::path p(path);
  const bool directory = fs::is_directory(p);
  if (!directory && p.extension() != ".json")
    return std::make_unique<Tokenizer>(path);
#ifdef RLHF_HAVE_BPE
  // The config beside the tokenizer's json names bos, eos and pad.
  std::unique_ptr<BpeTokenizer> t = directory
                                        ? BpeTokenizer::fromDirectory(path)
                                        : BpeTokenizer::fromFile(path);
  if (t->pad() < 0)
    throw Error("tokenizer '" + path +
                "' names no pad token; the runtime pads batches with it and "
                "masks it out of losses. Add \"pad_token\" to "
                "tokenizer_config.json, naming a special token the model "
                "never generates (LLaMA-3.1: \"<|finetune_right_pad_id|>\")");
  return t;
#else
  throw Error("tokenizer '" + path +
              "' is a Hugging Face tokenizer, but this runtime was built "
              "without byte-level BPE (PCRE2 and ICU were missing); rebuild "
              "after scripts/setup.sh, or on a GPU node carry them");
#endif
}
