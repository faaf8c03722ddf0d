//===- Server.h - the .rlhf language server's documents ---------*- C++ -*-===//
//
// Keeps every open .rlhf document analysed with the same frontend and
// planning pipeline as rlhfc, and answers the language features on it. The
// JSON-RPC side lives in LSPServer.h.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_LSP_SERVER_H
#define RLHFC_LSP_SERVER_H

#include "rlhfc/Frontend/Frontend.h"
#include "rlhfc/Transforms/Pipeline.h"

#include "mlir/Tools/lsp-server-support/Protocol.h"

#include <memory>
#include <optional>

namespace rlhfc::lsp {

struct ServerOptions {
  /// Import search path and stdlib, as rlhfc's -I and --stdlib give them.
  FrontendOptions frontend;
  /// How calls are planned for hovers and planner diagnostics, as rlhfc's
  /// --planner, --search-budget, --seed and --calibration give them.
  PlanningOptions planning;
};

class Server {
public:
  explicit Server(const ServerOptions &options);
  ~Server();

  /// Adds or replaces a document and returns its frontend diagnostics (the
  /// parse and Sema errors rlhfc reports).
  void addDocument(const mlir::lsp::URIForFile &uri, llvm::StringRef contents,
                   int64_t version,
                   std::vector<mlir::lsp::Diagnostic> &diagnostics);
  /// Applies edits (positions in UTF-16 units) to an open document and
  /// analyses it again. Returns the version the diagnostics belong to: the
  /// new one, or the old one when an edit did not apply (the text is kept);
  /// nothing for a document that is not open.
  std::optional<int64_t> updateDocument(
      const mlir::lsp::URIForFile &uri,
      llvm::ArrayRef<mlir::lsp::TextDocumentContentChangeEvent> changes,
      int64_t version, std::vector<mlir::lsp::Diagnostic> &diagnostics);
  /// Analyses every open document but `except` again, since a file they
  /// import may have changed on disk; calls `publish` for each whose
  /// diagnostics changed.
  void
  recheckOthers(const mlir::lsp::URIForFile &except,
                llvm::function_ref<void(const mlir::lsp::URIForFile &, int64_t,
                                        std::vector<mlir::lsp::Diagnostic> &)>
                    publish);
  /// Forgets a document; returns its last version if it was open.
  std::optional<int64_t> removeDocument(const mlir::lsp::URIForFile &uri);

  /// Plans the document's runs unless this version already is (a hover on a
  /// call may have). Returns true, with the version and all diagnostics of
  /// the document, the first time after the planner reported errors (a
  /// predicted out-of-memory), which the client has not seen yet.
  /// With `ifPlanned`, it does not plan, and only reports what planning
  /// that already ran (for a hover that needed the plan) found.
  bool planDocument(const mlir::lsp::URIForFile &uri, int64_t &version,
                    std::vector<mlir::lsp::Diagnostic> &diagnostics,
                    bool ifPlanned = false);

  void getLocationsOf(const mlir::lsp::URIForFile &uri,
                      const mlir::lsp::Position &pos,
                      std::vector<mlir::lsp::Location> &locations);
  std::optional<mlir::lsp::Hover> findHover(const mlir::lsp::URIForFile &uri,
                                            const mlir::lsp::Position &pos);
  void findDocumentSymbols(const mlir::lsp::URIForFile &uri,
                           std::vector<mlir::lsp::DocumentSymbol> &symbols);
  mlir::lsp::CompletionList getCodeCompletion(const mlir::lsp::URIForFile &uri,
                                              const mlir::lsp::Position &pos);

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace rlhfc::lsp

#endif // RLHFC_LSP_SERVER_H
