//===- MessageFilter.cpp - keep malformed JSON-RPC from the transport -----===//

#include "rlhfc/LSP/MessageFilter.h"

#include "mlir/Tools/lsp-server-support/Logging.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include <unistd.h>

using namespace rlhfc::lsp;

/// `id`'s request rewritten to be refused with `code` for `why`.
static std::string refusal(const llvm::json::Value &id, const std::string &why,
                           int code) {
  llvm::json::Object call{
      {"jsonrpc", "2.0"},
      {"id", id},
      {"method", kInvalidRequestMethod},
      {"params", llvm::json::Object{{"reason", why}, {"code", code}}}};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::json::Value(std::move(call));
  return out;
}

std::optional<std::string> rlhfc::lsp::filterMessage(const std::string &body,
                                                     std::string &why,
                                                     Lifecycle &life) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(body);
  if (!parsed) {
    // The transport logs unparsable JSON and goes on: leave it to it.
    llvm::consumeError(parsed.takeError());
    return body;
  }
  llvm::json::Object *o = parsed->getAsObject();
  if (o && o->getString("jsonrpc") == std::optional<llvm::StringRef>("2.0") &&
      (o->get("id") || o->getString("method"))) {
    std::optional<llvm::StringRef> method = o->getString("method");
    const llvm::json::Value *id = o->get("id");
    if (!method || *method == "exit") // a reply, or the end
      return body;
    if (life.shutDown) {
      why = "the server is shut down; only \"exit\" is accepted";
      if (!id)
        return std::nullopt;
      return refusal(*id, why, -32600);
    }
    if (*method == "initialize") {
      if (life.initialized && id)
        return refusal(*id, "the server is already initialized", -32600);
      life.initialized = true;
      return body;
    }
    if (!life.initialized) {
      why = "the server is not initialized; send \"initialize\" first";
      if (!id)
        return std::nullopt;
      return refusal(*id, why, -32002);
    }
    if (*method == "shutdown")
      life.shutDown = true;
    return body;
  }
  why = !o ? "not a JSON object"
        : !o->getString("jsonrpc") ? "no \"jsonrpc\": \"2.0\""
        : o->getString("jsonrpc") != std::optional<llvm::StringRef>("2.0")
            ? "\"jsonrpc\" is not \"2.0\""
            : "neither \"id\" nor \"method\"";
  const llvm::json::Value *id = o ? o->get("id") : nullptr;
  if (!id)
    return std::nullopt;
  return refusal(*id, "invalid request: " + why, -32600);
}

namespace {
bool writeAll(int fd, const std::string &s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0)
      return false;
    done += size_t(n);
  }
  return true;
}
} // namespace

void rlhfc::lsp::filterMessages(std::FILE *in, int outFd) {
  char line[4096];
  Lifecycle life;
  while (true) {
    // Headers up to an empty line; only Content-Length matters.
    long long length = -1;
    bool eof = true;
    while (std::fgets(line, sizeof line, in)) {
      eof = false;
      llvm::StringRef l = llvm::StringRef(line).rtrim("\r\n");
      if (l.empty()) {
        if (length >= 0)
          break;
        continue; // blank lines between messages
      }
      if (l.consume_front_insensitive("content-length:")) {
        l = l.trim();
        if (l.getAsInteger(10, length))
          length = -1;
      }
    }
    if (eof || length < 0)
      break;
    std::string body(size_t(length), '\0');
    if (std::fread(body.data(), 1, body.size(), in) != body.size())
      break;
    std::string why;
    std::optional<std::string> pass = filterMessage(body, why, life);
    if (!pass) {
      mlir::lsp::Logger::error("dropped a message ({0}): {1}", why,
                               llvm::StringRef(body).take_front(200));
      continue;
    }
    std::string framed =
        "Content-Length: " + std::to_string(pass->size()) + "\r\n\r\n" + *pass;
    if (!writeAll(outFd, framed))
      break;
  }
  ::close(outFd);
}
