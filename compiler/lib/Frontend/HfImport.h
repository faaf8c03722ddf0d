//===- HfImport.h - `: hf("dir")` imports at compile time -------*- C++ -*-===//

#ifndef RLHFC_FRONTEND_HFIMPORT_H
#define RLHFC_FRONTEND_HFIMPORT_H

#include "rlhfc/Frontend/AST.h"
#include "rlhfc/Frontend/Sema.h"

#include <optional>
#include <string>

namespace rlhfc::sema {

/// A Hugging Face checkpoint directory, read for an arch or a model.
struct HfImport {
  rlhf::HfArch arch;
  std::string dir;           ///< absolute
  std::string name;          ///< the directory's name, as the architecture's
  /// What the runtime loads for the checkpoint's tokenizer: the directory
  /// (its tokenizer.json), or its tokenizer.model where tokenizer.json is a
  /// byte_fallback BPE (LLaMA-2's, Mistral's), which the runtime reads as
  /// sentencepiece; empty when it has neither.
  std::string tokenizer;
  /// Set when tokenizer.json is byte_fallback and there is no
  /// tokenizer.model: the runtime could not load it.
  bool byteFallbackOnly = false;
};

/// Reads the config.json of `d`'s `hf("dir")` (relative to d's file); emits
/// a located error at the path and returns nullopt when it cannot.
std::optional<HfImport> importHf(const ast::EntityDecl &d);

/// `a` with the shape and numerics of the checkpoint; properties written in
/// the declaration are applied after it and win.
void applyHf(const HfImport &h, Arch &a);

} // namespace rlhfc::sema

#endif // RLHFC_FRONTEND_HFIMPORT_H
