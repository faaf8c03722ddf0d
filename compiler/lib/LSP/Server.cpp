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
  /// The last plan's diagnostics, moved with the lines the edits since
  /// left: planning waits for a save or a hover, and until then they stay
  /// (withdrawing them on every keystroke hid a known error while typing).
  std::vector<mlsp::Diagnostic> carried;
};

/// `text` as lines.
std::vector<llvm::StringRef> linesOf(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  return {lines.begin(), lines.end()};
}

/// `diags` of `uri` on `before`'s lines, on `after`'s: a line the edit left
/// (in the common head or tail) keeps its place or moves with the tail; a
/// diagnostic on an edited line is dropped, and so is a note there.
std::vector<mlsp::Diagnostic> carryOver(std::vector<mlsp::Diagnostic> diags,
                                        const mlsp::URIForFile &uri,
                                        llvm::StringRef before,
                                        llvm::StringRef after) {
  std::vector<llvm::StringRef> a = linesOf(before), b = linesOf(after);
  size_t head = 0, tail = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head])
    ++head;
  while (tail < a.size() - head && tail < b.size() - head &&
         a[a.size() - 1 - tail] == b[b.size() - 1 - tail])
    ++tail;
  auto move = [&](mlsp::Range &r) {
    for (mlsp::Position *p : {&r.start, &r.end}) {
      if (p->line < 0 || size_t(p->line) >= a.size())
        return false;
      if (size_t(p->line) >= head) {
        if (size_t(p->line) < a.size() - tail)
          return false;
        p->line += int(b.size()) - int(a.size());
      }
    }
    return true;
  };
  std::vector<mlsp::Diagnostic> out;
  for (mlsp::Diagnostic &d : diags) {
    if (!move(d.range))
      continue;
    if (d.relatedInformation) {
      std::vector<mlsp::DiagnosticRelatedInformation> kept;
      for (mlsp::DiagnosticRelatedInformation &n : *d.relatedInformation)
        if (n.location.uri != uri || move(n.location.range))
          kept.push_back(std::move(n));
      d.relatedInformation = std::move(kept);
    }
    out.push_back(std::move(d));
  }
  return out;
}
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

/// Applies LSP edits to `text`. MLIR's TextDocumentContentChangeEvent::applyTo
/// counts columns in bytes; LSP counts UTF-16 units, so any edit after a
/// non-ASCII character on its line would land elsewhere, or split a
/// character.
static mlir::LogicalResult
applyChanges(llvm::ArrayRef<mlsp::TextDocumentContentChangeEvent> changes,
             std::string &text) {
  std::string result = text;
  for (const mlsp::TextDocumentContentChangeEvent &change : changes) {
    if (!change.range) {
      result = change.text;
      continue;
    }
    SourceText source(result);
    mlsp::Position last = source.positionOf(result.size());
    auto inside = [&](const mlsp::Position &p) {
      return p.line >= 0 && p.character >= 0 && p.line <= last.line;
    };
    if (!inside(change.range->start) || !inside(change.range->end))
      return mlir::failure();
    size_t begin = source.offsetOf(change.range->start);
    size_t end = source.offsetOf(change.range->end);
    if (begin > end)
      return mlir::failure();
    result.replace(begin, end - begin, change.text);
  }
  text = std::move(result);
  return mlir::success();
}

std::optional<int64_t> Server::updateDocument(
    const mlsp::URIForFile &uri,
    llvm::ArrayRef<mlsp::TextDocumentContentChangeEvent> changes,
    int64_t version, std::vector<mlsp::Diagnostic> &diagnostics) {
  auto it = impl->documents.find(uri.file());
  if (it == impl->documents.end()) {
    mlsp::Logger::error("change to a document that is not open: {0}",
                        uri.file());
    return std::nullopt;
  }
  OpenDocument &open = it->second;
  const std::string before = open.contents;
  if (open.doc && open.doc->isPlanned())
    open.carried = open.doc->getPlanDiagnostics();
  if (mlir::failed(applyChanges(changes, open.contents))) {
    mlsp::Logger::error("cannot apply the changes to {0}", uri.file());
    // The text is as before; so are its diagnostics, which the caller
    // publishes again under the version they belong to (an empty list
    // would clear them).
    impl->analyse(uri, open, diagnostics);
    return open.version;
  }
  open.version = version;
  impl->analyse(uri, open, diagnostics);
  open.carried = carryOver(std::move(open.carried), uri, before, open.contents);
  // A program the frontend rejects is not planned: old plan errors would
  // only distract from its own.
  if (!open.doc->hasFrontendErrors())
    diagnostics.insert(diagnostics.end(), open.carried.begin(),
                       open.carried.end());
  return version;
}

void Server::recheckOthers(
    const mlsp::URIForFile &except,
    llvm::function_ref<void(const mlsp::URIForFile &, int64_t,
                            std::vector<mlsp::Diagnostic> &)>
        publish) {
  for (auto &entry : impl->documents) {
    OpenDocument &open = entry.second;
    if (entry.first() == except.file())
      continue;
    std::vector<mlsp::Diagnostic> before = open.doc->getDiagnostics(), after;
    mlsp::URIForFile uri = open.doc->getURI();
    impl->analyse(uri, open, after);
    auto same = [](const mlsp::Diagnostic &a, const mlsp::Diagnostic &b) {
      return a.range == b.range && a.message == b.message &&
             a.severity == b.severity;
    };
    if (!std::equal(before.begin(), before.end(), after.begin(), after.end(),
                    same))
      publish(uri, open.version, after);
  }
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
                          std::vector<mlsp::Diagnostic> &diagnostics,
                          bool ifPlanned) {
  auto it = impl->documents.find(uri.file());
  if (it == impl->documents.end())
    return false;
  if (ifPlanned && !it->second.doc->isPlanned())
    return false;
  it->second.doc->plan();
  // Publish when the plan has diagnostics, or when the client still shows
  // an earlier plan's (carried over edits) that this one replaces.
  const bool fresh = it->second.doc->takeNewPlanDiagnostics();
  if (!fresh && it->second.carried.empty())
    return false;
  it->second.carried.clear();
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
