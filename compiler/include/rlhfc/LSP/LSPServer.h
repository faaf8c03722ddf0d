//===- LSPServer.h - JSON-RPC front of the .rlhf language server -*- C++
//-*-===//

#ifndef RLHFC_LSP_LSPSERVER_H
#define RLHFC_LSP_LSPSERVER_H

#include "mlir/Support/LogicalResult.h"

namespace mlir::lsp {
class JSONTransport;
} // namespace mlir::lsp

namespace rlhfc::lsp {

class Server;

/// Serves LSP requests from `transport` until the client exits. Succeeds
/// when the client asked for a shutdown first.
mlir::LogicalResult runLSPServer(Server &server,
                                 mlir::lsp::JSONTransport &transport);

} // namespace rlhfc::lsp

#endif // RLHFC_LSP_LSPSERVER_H
