//===- MessageFilter.cpp - keep malformed JSON-RPC from the transport -----===//

#include "rlhfc/LSP/MessageFilter.h"

#include "mlir/Tools/lsp-server-support/Logging.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include <unistd.h>

using namespace rlhfc::lsp;

std::optional<std::string> rlhfc::lsp::filterMessage(const std::string &body,
                                                     std::string &why) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(body);
  if (!parsed) {
    // The transport logs unparsable JSON and goes on: leave it to it.
    llvm::consumeError(parsed.takeError());
    return body;
  }
  llvm::json::Object *o = parsed->getAsObject();
  if (o && o->getString("jsonrpc") == std::optional<llvm::StringRef>("2.0") &&
      (o->get("id") || o->getString("method")))
    return body;
  why = !o ? "not a JSON object"
        : !o->getString("jsonrpc") ? "no \"jsonrpc\": \"2.0\""
        : o->getString("jsonrpc") != std::optional<llvm::StringRef>("2.0")
            ? "\"jsonrpc\" is not \"2.0\""
            : "neither \"id\" nor \"method\"";
  const llvm::json::Value *id = o ? o->get("id") : nullptr;
  if (!id)
    return std::nullopt;
  llvm::json::Object call{{"jsonrpc", "2.0"},
                          {"id", *id},
                          {"method", kInvalidRequestMethod},
                          {"params", llvm::json::Object{{"reason", why}}}};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::json::Value(std::move(call));
  return out;
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
    std::optional<std::string> pass = filterMessage(body, why);
    if (!pass) {
      mlir::lsp::Logger::error("dropped a malformed message ({0}): {1}", why,
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
