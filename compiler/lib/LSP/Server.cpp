//===- Server.cpp - the .rlhf language server's documents -----------------===//

#include "rlhfc/LSP/Server.h"

#include "Features.h"

#include "rlhf/IR/RLHFDialect.h"

#include "mlir/Tools/lsp-server-support/Logging.h"
#include "llvm/ADT/StringMap.h"

using namespace rlhfc;
using namespace rlhfc::lsp;
namespace mlsp = mlir::lsp;

namespace {
struct OpenDocument {
  std::string contents;
  int64_t version = 0;
  std::unique_ptr<Document> doc;
};
} // namespace

struct Server::Impl {
  explicit Impl(const ServerOptions &options)
      : options(options), ctx(mlir::MLIRContext::Threading::DISABLED) {
    ctx.getOrLoadDialect<mlir::rlhf::RLHFDialect>();
    // Errors point at .rlhf source, as in rlhfc.
    ctx.printOpOnDiagnostic(false);
  }

  Document *lookup(const mlsp::URIForFile &uri) {
    auto it = documents.find(uri.file());
    return it == documents.end() ? nullptr : it->second.doc.get();
  }

  void analyse(const mlsp::URIForFile &uri, OpenDocument &open,
               std::vector<mlsp::Diagnostic> &diagnostics) {
    open.doc = std::make_unique<Document>(ctx, options, uri, open.contents);
    diagnostics = open.doc->getDiagnostics();
  }

  ServerOptions options;
  mlir::MLIRContext ctx;
  llvm::StringMap<OpenDocument> documents;
};

Server::Server(const ServerOptions &options)
    : impl(std::make_unique<Impl>(options)) {}
Server::~Server() = default;

void Server::addDocument(const mlsp::URIForFile &uri, llvm::StringRef contents,
                         int64_t version,
                         std::vector<mlsp::Diagnostic> &diagnostics) {
  OpenDocument &open = impl->documents[uri.file()];
  open.contents = contents.str();
  open.version = version;
  impl->analyse(uri, open, diagnostics);
}

void Server::updateDocument(
    const mlsp::URIForFile &uri,
    llvm::ArrayRef<mlsp::TextDocumentContentChangeEvent> changes,
    int64_t version, std::vector<mlsp::Diagnostic> &diagnostics) {
  auto it = impl->documents.find(uri.file());
  if (it == impl->documents.end()) {
    mlsp::Logger::error("change to a document that is not open: {0}",
                        uri.file());
    return;
  }
  OpenDocument &open = it->second;
  if (mlir::failed(mlsp::TextDocumentContentChangeEvent::applyTo(
          changes, open.contents))) {
    mlsp::Logger::error("cannot apply the changes to {0}", uri.file());
    // The text is as before; so are its diagnostics, which the caller
    // publishes again (an empty list would clear them).
    impl->analyse(uri, open, diagnostics);
    return;
  }
  open.version = version;
  impl->analyse(uri, open, diagnostics);
}

std::optional<int64_t> Server::removeDocument(const mlsp::URIForFile &uri) {
  auto it = impl->documents.find(uri.file());
  if (it == impl->documents.end())
    return std::nullopt;
  int64_t version = it->second.version;
  impl->documents.erase(it);
  return version;
}

bool Server::planDocument(const mlsp::URIForFile &uri, int64_t &version,
                          std::vector<mlsp::Diagnostic> &diagnostics) {
  auto it = impl->documents.find(uri.file());
  if (it == impl->documents.end())
    return false;
  it->second.doc->plan();
  if (!it->second.doc->takeNewPlanDiagnostics())
    return false;
  version = it->second.version;
  diagnostics = it->second.doc->getDiagnostics();
  return true;
}

void Server::getLocationsOf(const mlsp::URIForFile &uri,
                            const mlsp::Position &pos,
                            std::vector<mlsp::Location> &locations) {
  if (Document *doc = impl->lookup(uri))
    findDefinitions(*doc, pos, locations);
}

std::optional<mlsp::Hover> Server::findHover(const mlsp::URIForFile &uri,
                                             const mlsp::Position &pos) {
  if (Document *doc = impl->lookup(uri))
    return rlhfc::lsp::findHover(*doc, pos);
  return std::nullopt;
}

void Server::findDocumentSymbols(const mlsp::URIForFile &uri,
                                 std::vector<mlsp::DocumentSymbol> &symbols) {
  if (Document *doc = impl->lookup(uri))
    rlhfc::lsp::findDocumentSymbols(*doc, symbols);
}

mlsp::CompletionList Server::getCodeCompletion(const mlsp::URIForFile &uri,
                                               const mlsp::Position &pos) {
  if (Document *doc = impl->lookup(uri))
    return complete(*doc, pos);
  return {};
}
