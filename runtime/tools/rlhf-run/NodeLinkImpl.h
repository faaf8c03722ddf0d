//===- NodeLinkImpl.h - what NodeLink's two files share ---------*- C++ -*-===//
//
// The protocol's constants, a connection's state and line splitting, used
// by the core (NodeLink.cpp) and by node 0's and the other nodes' roles
// (NodeLinkRoles.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUN_NODELINKIMPL_H
#define RLHF_RUN_NODELINKIMPL_H

#include "NodeLink.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/xxhash.h"

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <sys/socket.h>

namespace rlhfrun {

using Clock = std::chrono::steady_clock;

inline constexpr const char *Hello = "rlhf-run/2 hello";
/// What every launcher's hello starts with, whatever its version.
inline constexpr const char *HelloAnyVersion = "rlhf-run/";
inline constexpr std::chrono::seconds HeartbeatEvery{1};
/// A connection that does not say hello within this is not a launcher.
inline constexpr std::chrono::seconds HelloWithin{10};

struct NodeLink::Peer {
  int fd = -1;
  int node = -1; ///< -1 until it introduced itself
  std::string in, out;
  Clock::time_point lastHeard, helloBy;
  bool joined = false, done = false, saidBye = false;
  bool closed = false, reported = false;
  /// Node 0 said goodbye or closed its end: dropped at the next step, so
  /// that what this step's lines reported can still be answered (a node
  /// deciding on node 0's last failure report names its stopped ranks).
  bool ending = false;
  std::string why; ///< why the connection ended, unless saidBye
};

/// Writes as much of `out` as the socket takes now; false when the
/// connection broke.
inline bool flush(int fd, std::string &out) {
  while (!out.empty()) {
    ssize_t n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out.erase(0, n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

/// The program's arguments in one protocol word: their hash, in hex.
inline std::string argsDigest(const std::vector<std::string> &args) {
  std::string all;
  for (const std::string &a : args)
    all += a + '\0'; // ends each, so "a b" and "ab" differ
  return llvm::utohexstr(llvm::xxh3_64bits(llvm::StringRef(all)));
}

/// The space-separated words of a protocol line.
inline std::vector<llvm::StringRef> words(llvm::StringRef line) {
  llvm::SmallVector<llvm::StringRef, 8> w;
  line.split(w, ' ', -1, false);
  return {w.begin(), w.end()};
}

/// A worker event (WorkerFailed, Signal, Stopped) as a protocol line:
/// "fail RANK STATUS", "signal SIG", "stopped RANK", with the node's number
/// after the word when node 0 passes one on (`withNode`).
std::string eventLine(const NodeEvent &e, bool withNode);
/// The worker event of such a line's words, or none (another message, or a
/// malformed one).
std::optional<NodeEvent> parseEvent(llvm::ArrayRef<llvm::StringRef> w,
                                    bool withNode);

} // namespace rlhfrun

#endif // RLHF_RUN_NODELINKIMPL_H
