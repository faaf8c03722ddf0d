//===- HfImport.cpp - `: hf("dir")` imports at compile time ---------------===//
//
// An architecture comes from the checkpoint's config.json, so the planner
// and the cost model see exactly the parameters the checkpoint has, and the
// runtime computes with its rope base, scaling, norm epsilon and biases.
//
//===----------------------------------------------------------------------===//

#include "HfImport.h"

#include "rlhfc/Support/SourcePaths.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"

using namespace rlhfc;
using namespace rlhfc::sema;

std::optional<HfImport> rlhfc::sema::importHf(const ast::EntityDecl &d) {
  HfImport h;
  h.dir = resolveFrom(d.basePathLoc, *d.basePath);
  rlhf::HfConfigError error;
  std::optional<rlhf::HfArch> arch = rlhf::readHfConfig(h.dir, error);
  if (!arch) {
    mlir::emitError(d.basePathLoc) << "cannot import checkpoint \""
                                   << *d.basePath << "\": " << error.message;
    return std::nullopt;
  }
  h.arch = *arch;
  h.name = llvm::sys::path::filename(h.dir).str();
  llvm::SmallString<256> json(h.dir), model(h.dir);
  llvm::sys::path::append(json, "tokenizer.json");
  llvm::sys::path::append(model, "tokenizer.model");
  if (!llvm::sys::fs::exists(json)) {
    if (llvm::sys::fs::exists(model))
      h.tokenizer = model.str().str();
    return h;
  }
  h.tokenizer = h.dir;
  // LLaMA-2's and Mistral's tokenizer.json is a byte_fallback BPE beside
  // the sentencepiece model it was converted from; the runtime reads that.
  // The key sits before the vocabulary, so a regex over the text finds it.
  if (auto buf = llvm::MemoryBuffer::getFile(json)) {
    static const llvm::Regex byteFallback(
        "\"byte_fallback\"[[:space:]]*:[[:space:]]*true");
    if (byteFallback.match((*buf)->getBuffer())) {
      h.tokenizer.clear();
      if (llvm::sys::fs::exists(model))
        h.tokenizer = model.str().str();
      else
        h.byteFallbackOnly = true;
    }
  }
  return h;
}

void rlhfc::sema::applyHf(const HfImport &h, Arch &a) {
  const rlhf::ModelShape &s = h.arch.shape;
  a.layers = s.layers;
  a.hidden = s.hidden;
  a.heads = s.heads;
  a.kvHeads = s.kvHeads;
  a.ffn = s.ffn;
  a.vocab = s.vocab;
  a.tieEmbeddings = s.tieEmbeddings;
  a.qkvBias = s.qkvBias;
  a.maxSeq = h.arch.maxPositions;
  a.ropeTheta = h.arch.ropeTheta;
  a.normEps = h.arch.normEps;
  a.rope = h.arch.rope;
  a.hfDir = h.dir;
}
