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
#include "llvm/Support/Path.h"

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
  llvm::SmallString<256> tok(h.dir);
  llvm::sys::path::append(tok, "tokenizer.json");
  h.hasTokenizer = llvm::sys::fs::exists(tok);
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
