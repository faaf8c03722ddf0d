//===- Document.cpp - one analysed version of an open .rlhf file ----------===//

#include "Document.h"

#include "mlir/Tools/lsp-server-support/Logging.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace rlhfc;
using namespace rlhfc::lsp;
namespace mlsp = mlir::lsp;

Document::Document(mlir::MLIRContext &ctx, const ServerOptions &options,
                   const mlsp::URIForFile &uri, llvm::StringRef contents)
    : ctx(ctx), options(options), uri(uri) {
  // The buffer is named by the document's path, so imports resolve from its
  // folder whether or not the file exists on disk yet.
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(contents, uri.file()),
      llvm::SMLoc());
  {
    DiagnosticRecorder recorder(ctx, frontendDiags);
    checked =
        mlir::succeeded(loadProgram(sourceMgr, ctx, options.frontend, program));
  }
  for (unsigned id = 1; id <= sourceMgr.getNumBuffers(); ++id) {
    const llvm::MemoryBuffer *buf = sourceMgr.getMemoryBuffer(id);
    texts.emplace(buf->getBufferIdentifier().str(),
                  std::make_unique<SourceText>(buf->getBuffer()));
  }
  mainText = texts.at(uri.file().str()).get();
  // One global namespace; the first declaration of a name is the one Sema
  // keeps (later ones are errors).
  for (const auto &m : program.modules) {
    for (const auto &e : m->entities)
      entities.emplace(e->name, e.get());
    for (const auto &a : m->algorithms)
      algorithms.emplace(a->name, a.get());
  }
  // Sema keeps the first function of a name in its declaration order.
  for (const ast::Module *m : sema::declarationOrder(program))
    for (const auto &f : m->functions)
      if (!m->prelude ||
          (!entities.count(f->name) && !algorithms.count(f->name)))
        functions.emplace(f->name, f.get());
  occurrences = indexOccurrences(*this);
}

const ast::Module *Document::getMainModule() const {
  if (program.modules.empty() ||
      program.modules.front()->filename != uri.file())
    return nullptr;
  return program.modules.front().get();
}

const ast::EntityDecl *Document::lookupEntity(llvm::StringRef name) const {
  auto it = entities.find(name.str());
  return it == entities.end() ? nullptr : it->second;
}

const ast::AlgorithmDecl *
Document::lookupAlgorithm(llvm::StringRef name) const {
  auto it = algorithms.find(name.str());
  return it == algorithms.end() ? nullptr : it->second;
}

const ast::FnDecl *Document::lookupFunction(llvm::StringRef name) const {
  auto it = functions.find(name.str());
  return it == functions.end() ? nullptr : it->second;
}

std::vector<const sema::Instance *>
Document::instancesOf(const ast::AlgorithmDecl &alg) const {
  std::vector<const sema::Instance *> out;
  for (const sema::Instance &in : program.instances)
    if (in.algorithm == alg.name)
      out.push_back(&in);
  return out;
}

const Occurrence *Document::occurrenceAt(size_t offset) const {
  const Occurrence *best = nullptr;
  auto better = [&](const Occurrence &o) {
    if (!best)
      return true;
    // A name the offset is strictly inside beats one it only touches.
    bool inside = offset < o.end, bestInside = offset < best->end;
    if (inside != bestInside)
      return inside;
    return o.end - o.begin < best->end - best->begin;
  };
  for (const Occurrence &o : occurrences)
    if (o.begin <= offset && offset <= o.end && better(o))
      best = &o;
  return best;
}

const SourceText *Document::textOf(llvm::StringRef filename) const {
  auto it = texts.find(filename.str());
  return it == texts.end() ? nullptr : it->second.get();
}

bool Document::isMainFile(llvm::StringRef filename) const {
  return filename == uri.file();
}

mlsp::URIForFile Document::uriFor(llvm::StringRef filename) const {
  if (isMainFile(filename))
    return uri;
  llvm::Expected<mlsp::URIForFile> fileURI =
      mlsp::URIForFile::fromFile(filename);
  if (!fileURI) {
    mlsp::Logger::error("no URI for '{0}': {1}", filename,
                        llvm::toString(fileURI.takeError()));
    return uri;
  }
  return *fileURI;
}

std::optional<mlsp::Location> Document::toLSPLocation(mlir::Location loc,
                                                      size_t length) const {
  auto fileLoc = mlir::dyn_cast<mlir::FileLineColLoc>(loc);
  if (!fileLoc)
    return std::nullopt;
  llvm::StringRef file = fileLoc.getFilename().getValue();
  const SourceText *text = textOf(file);
  if (!text) {
    mlsp::Position pos(int(fileLoc.getLine()) - 1,
                       fileLoc.getColumn() ? int(fileLoc.getColumn()) - 1 : 0);
    return mlsp::Location(uriFor(file), mlsp::Range(pos));
  }
  size_t begin = text->offsetOf(fileLoc);
  size_t end = length ? begin + length : text->tokenEnd(begin);
  return mlsp::Location(uriFor(file), text->rangeOf(begin, end));
}

const llvm::json::Object *RunPlan::entryAt(llvm::StringRef key,
                                           llvm::ArrayRef<mlir::Location> locs,
                                           mlir::Location loc) const {
  const llvm::json::Array *entries = report.getArray(key);
  for (size_t i = 0; entries && i < locs.size() && i < entries->size(); ++i)
    if (locs[i] == loc)
      return (*entries)[i].getAsObject();
  return nullptr;
}
