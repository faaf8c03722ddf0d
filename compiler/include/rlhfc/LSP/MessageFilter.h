//===- MessageFilter.h - keep malformed JSON-RPC from the transport -*- C++ -*-===//
//
// MLIR's JSONTransport stops serving at the first message that is valid
// JSON but not a JSON-RPC 2.0 message (an array, no "jsonrpc", neither id
// nor method). An editor that sends one would lose its server. The filter
// sits between stdin and the transport: it passes well-formed messages on,
// turns a malformed one that carries an id into a call of
// kInvalidRequestMethod (which the server answers with InvalidRequest), and
// drops, with a log line, one it cannot answer.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_LSP_MESSAGEFILTER_H
#define RLHFC_LSP_MESSAGEFILTER_H

#include "llvm/ADT/StringRef.h"

#include <cstdio>
#include <optional>
#include <string>

namespace rlhfc::lsp {

/// The method a malformed request with an id is rewritten to call; its
/// params carry the reason and the error code.
inline constexpr llvm::StringLiteral kInvalidRequestMethod =
    "$/rlhf/invalidRequest";

/// Where the session is (LSP 3.17's lifecycle): before `initialize` a
/// request is answered ServerNotInitialized (-32002) and a notification
/// dropped; after `shutdown` every message but `exit` is refused.
struct Lifecycle {
  bool initialized = false, shutDown = false;
};

/// The body to pass on for `body` (a message's JSON text): itself, a
/// rewritten request, or nothing to drop it (with `why` set).
std::optional<std::string> filterMessage(const std::string &body,
                                         std::string &why, Lifecycle &life);

/// Reads Content-Length framed messages from `in` until EOF, and writes the
/// filtered ones, framed again, to `outFd`, which it closes at the end.
void filterMessages(std::FILE *in, int outFd);

} // namespace rlhfc::lsp

#endif // RLHFC_LSP_MESSAGEFILTER_H
