//===- LSPServer.cpp - JSON-RPC front of the .rlhf language server --------===//
//
// Maps LSP requests and notifications onto Server, over MLIR's transport
// (mlir/Tools/lsp-server-support), the way MLIR's own servers do.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/LSP/LSPServer.h"
#include "rlhfc/LSP/MessageFilter.h"
#include "rlhfc/LSP/Server.h"

#include "mlir/Tools/lsp-server-support/Logging.h"
#include "mlir/Tools/lsp-server-support/Transport.h"

using namespace rlhfc;
using namespace rlhfc::lsp;
namespace mlsp = mlir::lsp;

namespace rlhfc::lsp {
/// textDocument/didSave; MLIR's Protocol.h has no type for it.
struct DidSaveTextDocumentParams {
  mlsp::TextDocumentIdentifier textDocument;
};
static bool fromJSON(const llvm::json::Value &value,
                     DidSaveTextDocumentParams &result, llvm::json::Path path) {
  llvm::json::ObjectMapper o(value, path);
  return o && o.map("textDocument", result.textDocument);
}
/// The params of kInvalidRequestMethod.
struct InvalidRequestParams {
  std::string reason;
  int code = -32600;
};
static bool fromJSON(const llvm::json::Value &value,
                     InvalidRequestParams &result, llvm::json::Path path) {
  llvm::json::ObjectMapper o(value, path);
  return o && o.map("reason", result.reason) && o.map("code", result.code);
}
} // namespace rlhfc::lsp

namespace {

struct LSPServer {
  LSPServer(Server &server) : server(server) {}

  void onInitialize(const mlsp::InitializeParams &params,
                    mlsp::Callback<llvm::json::Value> reply);
  void onInitialized(const mlsp::InitializedParams &params) {}
  void onShutdown(const mlsp::NoParams &params,
                  mlsp::Callback<std::nullptr_t> reply);

  void onDocumentDidOpen(const mlsp::DidOpenTextDocumentParams &params);
  void onDocumentDidClose(const mlsp::DidCloseTextDocumentParams &params);
  void onDocumentDidChange(const mlsp::DidChangeTextDocumentParams &params);
  void onDocumentDidSave(const DidSaveTextDocumentParams &params);

  void onGoToDefinition(const mlsp::TextDocumentPositionParams &params,
                        mlsp::Callback<std::vector<mlsp::Location>> reply);
  void onHover(const mlsp::TextDocumentPositionParams &params,
               mlsp::Callback<std::optional<mlsp::Hover>> reply);
  void
  onDocumentSymbol(const mlsp::DocumentSymbolParams &params,
                   mlsp::Callback<std::vector<mlsp::DocumentSymbol>> reply);
  void onCompletion(const mlsp::CompletionParams &params,
                    mlsp::Callback<mlsp::CompletionList> reply);
  /// A malformed request the message filter rewrote (MessageFilter.h).
  void onInvalidRequest(const InvalidRequestParams &params,
                        mlsp::Callback<std::nullptr_t> reply) {
    reply(llvm::make_error<mlsp::LSPError>(params.reason,
                                           mlsp::ErrorCode(params.code)));
  }

  /// Plans the document and publishes the planner's errors, if it has new
  /// ones. Planning takes up to seconds, so it runs when a document is opened
  /// or saved and when a hover needs the plan, never on a keystroke; after
  /// a hover (`ifPlanned`) only what that hover's planning found.
  void publishPlanDiagnostics(const mlsp::URIForFile &uri,
                              bool ifPlanned = false);

  Server &server;
  mlsp::OutgoingNotification<mlsp::PublishDiagnosticsParams> publishDiagnostics;
  bool shutdownRequestReceived = false;
};

} // namespace

void LSPServer::onInitialize(const mlsp::InitializeParams &params,
                             mlsp::Callback<llvm::json::Value> reply) {
  llvm::json::Object serverCaps{
      {"textDocumentSync",
       llvm::json::Object{
           {"openClose", true},
           {"change", (int)mlsp::TextDocumentSyncKind::Incremental},
           {"save", true},
       }},
      {"completionProvider",
       llvm::json::Object{
           {"resolveProvider", false},
           {"triggerCharacters", {".", "(", ","}},
       }},
      {"definitionProvider", true},
      {"hoverProvider", true},
      {"documentSymbolProvider", true},
  };
  llvm::json::Object result{
      {{"serverInfo", llvm::json::Object{{"name", "rlhf-lsp-server"},
                                         {"version", RLHFC_VERSION}}},
       {"capabilities", std::move(serverCaps)}}};
  reply(std::move(result));
}

void LSPServer::onShutdown(const mlsp::NoParams &,
                           mlsp::Callback<std::nullptr_t> reply) {
  shutdownRequestReceived = true;
  reply(nullptr);
}

void LSPServer::publishPlanDiagnostics(const mlsp::URIForFile &uri,
                                       bool ifPlanned) {
  int64_t version = 0;
  std::vector<mlsp::Diagnostic> diagnostics;
  if (!server.planDocument(uri, version, diagnostics, ifPlanned))
    return;
  mlsp::PublishDiagnosticsParams diagParams(uri, version);
  diagParams.diagnostics = std::move(diagnostics);
  publishDiagnostics(diagParams);
}

void LSPServer::onDocumentDidOpen(
    const mlsp::DidOpenTextDocumentParams &params) {
  mlsp::PublishDiagnosticsParams diagParams(params.textDocument.uri,
                                            params.textDocument.version);
  server.addDocument(params.textDocument.uri, params.textDocument.text,
                     params.textDocument.version, diagParams.diagnostics);
  publishDiagnostics(diagParams);
  publishPlanDiagnostics(params.textDocument.uri);
}

void LSPServer::onDocumentDidClose(
    const mlsp::DidCloseTextDocumentParams &params) {
  std::optional<int64_t> version =
      server.removeDocument(params.textDocument.uri);
  if (!version)
    return;
  // An empty list clears what the client shows for the closed document.
  publishDiagnostics(
      mlsp::PublishDiagnosticsParams(params.textDocument.uri, *version));
}

void LSPServer::onDocumentDidChange(
    const mlsp::DidChangeTextDocumentParams &params) {
  std::vector<mlsp::Diagnostic> diagnostics;
  std::optional<int64_t> version =
      server.updateDocument(params.textDocument.uri, params.contentChanges,
                            params.textDocument.version, diagnostics);
  if (!version)
    return;
  mlsp::PublishDiagnosticsParams diagParams(params.textDocument.uri, *version);
  diagParams.diagnostics = std::move(diagnostics);
  publishDiagnostics(diagParams);
}

void LSPServer::onDocumentDidSave(const DidSaveTextDocumentParams &params) {
  publishPlanDiagnostics(params.textDocument.uri);
  // The saved file may be imported by other open documents.
  server.recheckOthers(params.textDocument.uri,
                       [&](const mlsp::URIForFile &uri, int64_t version,
                           std::vector<mlsp::Diagnostic> &diagnostics) {
                         mlsp::PublishDiagnosticsParams p(uri, version);
                         p.diagnostics = std::move(diagnostics);
                         publishDiagnostics(p);
                       });
}

void LSPServer::onGoToDefinition(
    const mlsp::TextDocumentPositionParams &params,
    mlsp::Callback<std::vector<mlsp::Location>> reply) {
  std::vector<mlsp::Location> locations;
  server.getLocationsOf(params.textDocument.uri, params.position, locations);
  reply(std::move(locations));
}

void LSPServer::onHover(const mlsp::TextDocumentPositionParams &params,
                        mlsp::Callback<std::optional<mlsp::Hover>> reply) {
  reply(server.findHover(params.textDocument.uri, params.position));
  publishPlanDiagnostics(params.textDocument.uri, /*ifPlanned=*/true);
}

void LSPServer::onDocumentSymbol(
    const mlsp::DocumentSymbolParams &params,
    mlsp::Callback<std::vector<mlsp::DocumentSymbol>> reply) {
  std::vector<mlsp::DocumentSymbol> symbols;
  server.findDocumentSymbols(params.textDocument.uri, symbols);
  reply(std::move(symbols));
}

void LSPServer::onCompletion(const mlsp::CompletionParams &params,
                             mlsp::Callback<mlsp::CompletionList> reply) {
  reply(server.getCodeCompletion(params.textDocument.uri, params.position));
}

mlir::LogicalResult rlhfc::lsp::runLSPServer(Server &server,
                                             mlsp::JSONTransport &transport) {
  LSPServer lspServer(server);
  mlsp::MessageHandler messageHandler(transport);

  messageHandler.method("initialize", &lspServer, &LSPServer::onInitialize);
  messageHandler.notification("initialized", &lspServer,
                              &LSPServer::onInitialized);
  messageHandler.method("shutdown", &lspServer, &LSPServer::onShutdown);

  messageHandler.notification("textDocument/didOpen", &lspServer,
                              &LSPServer::onDocumentDidOpen);
  messageHandler.notification("textDocument/didClose", &lspServer,
                              &LSPServer::onDocumentDidClose);
  messageHandler.notification("textDocument/didChange", &lspServer,
                              &LSPServer::onDocumentDidChange);
  messageHandler.notification("textDocument/didSave", &lspServer,
                              &LSPServer::onDocumentDidSave);

  messageHandler.method("textDocument/definition", &lspServer,
                        &LSPServer::onGoToDefinition);
  messageHandler.method("textDocument/hover", &lspServer, &LSPServer::onHover);
  messageHandler.method("textDocument/documentSymbol", &lspServer,
                        &LSPServer::onDocumentSymbol);
  messageHandler.method("textDocument/completion", &lspServer,
                        &LSPServer::onCompletion);
  messageHandler.method(kInvalidRequestMethod, &lspServer,
                        &LSPServer::onInvalidRequest);

  lspServer.publishDiagnostics =
      messageHandler.outgoingNotification<mlsp::PublishDiagnosticsParams>(
          "textDocument/publishDiagnostics");

  if (llvm::Error error = transport.run(messageHandler)) {
    mlsp::Logger::error("Transport error: {0}", error);
    llvm::consumeError(std::move(error));
    return mlir::failure();
  }
  return mlir::success(lspServer.shutdownRequestReceived);
}
