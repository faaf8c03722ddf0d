//===- NodeLink.cpp - launchers of a job watch each other -----------------===//
//
// Messages, one per line:
//   rlhf-run/2 hello NODE NNODES NPROC ARGS   another node introduces
//                                        itself (ARGS: argsDigest's hex)
//   welcome | reject TEXT                node 0's answer
//   hb                                   heartbeat, both ways, every second
//   fail [NODE] RANK STATUS              a worker failed (node 0 adds NODE)
//   stopped [NODE] RANK                  a worker is stopped (SIGSTOP): the
//                                        likely cause of its peers' failure
//   signal [NODE] SIG                    a launcher got a signal
//   error TEXT                           node 0 lost a node: stop
//   done | end                           a node's workers exited 0 | all did
//   bye                                  orderly close
//
//===----------------------------------------------------------------------===//

#include "NodeLinkImpl.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace llvm;
using namespace rlhfrun;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::string rlhfrun::describeNode(unsigned node, unsigned nproc) {
  if (nproc == 1)
    return formatv("node {0} (rank {0})", node).str();
  return formatv("node {0} (ranks {1}-{2})", node, node * nproc,
                 node * nproc + nproc - 1)
      .str();
}

std::string rlhfrun::eventLine(const NodeEvent &e, bool withNode) {
  std::string node = withNode ? formatv(" {0}", e.node).str() : "";
  switch (e.kind) {
  case NodeEvent::WorkerFailed:
    return formatv("fail{0} {1} {2}", node, e.rank, e.status).str();
  case NodeEvent::Signal:
    return formatv("signal{0} {1}", node, e.status).str();
  case NodeEvent::Stopped:
    return formatv("stopped{0} {1}", node, e.rank).str();
  default:
    return "";
  }
}

std::optional<NodeEvent> rlhfrun::parseEvent(ArrayRef<StringRef> w,
                                             bool withNode) {
  if (w.empty())
    return std::nullopt;
  NodeEvent e{NodeEvent::Error};
  // The numbers after the word, in order: node (when given), then these.
  SmallVector<int *, 3> into;
  if (w[0] == "fail") {
    e.kind = NodeEvent::WorkerFailed;
    into = {&e.rank, &e.status};
  } else if (w[0] == "signal") {
    e.kind = NodeEvent::Signal;
    into = {&e.status};
  } else if (w[0] == "stopped") {
    e.kind = NodeEvent::Stopped;
    into = {&e.rank};
  } else {
    return std::nullopt;
  }
  if (w.size() != 1 + size_t(withNode) + into.size())
    return std::nullopt;
  if (withNode && w[1].getAsInteger(10, e.node))
    return std::nullopt;
  for (size_t i = 0; i < into.size(); ++i)
    if (w[1 + size_t(withNode) + i].getAsInteger(10, *into[i]))
      return std::nullopt;
  return e;
}

void NodeLink::report(NodeEvent e) { broadcast(eventLine(e, hub)); }

namespace {

/// Why a peer's connection ended, after a failed send or receive. A
/// launcher killed with our heartbeats unread in its socket resets the
/// connection rather than closing it; to the user both are the same event,
/// and report the same.
std::string lostConnection(int err) {
  if (err == ECONNRESET || err == EPIPE)
    return "its launcher's connection closed";
  return formatv("its launcher's connection broke: {0}", strerror(err)).str();
}

} // namespace

NodeLink::NodeLink(const LinkConfig &cfg)
    : cfg(cfg), nextHeartbeat(Clock::now()) {}

NodeLink::~NodeLink() {
  for (auto &p : peers)
    if (!p->closed)
      ::close(p->fd);
  if (listenFd >= 0)
    ::close(listenFd);
}

void NodeLink::send(Peer &p, const std::string &line) {
  if (p.closed)
    return;
  p.out += line;
  p.out += '\n';
  if (!flush(p.fd, p.out) && p.why.empty())
    p.why = lostConnection(errno);
}

void NodeLink::broadcast(const std::string &line, const Peer *except) {
  for (auto &p : peers)
    if (p->joined && p.get() != except)
      send(*p, line);
}

void NodeLink::drop(Peer &p, const std::string &why) {
  if (p.closed)
    return;
  ::close(p.fd);
  p.closed = true;
  if (p.why.empty())
    p.why = why;
}

void NodeLink::dispatchLines(Peer &p, std::vector<NodeEvent> &events,
                             function_ref<bool(StringRef)> accept) {
  size_t start = 0, nl;
  while ((nl = p.in.find('\n', start)) != std::string::npos) {
    StringRef line = StringRef(p.in).slice(start, nl);
    if (accept(line))
      onLine(p, line, events);
    start = nl + 1;
  }
  p.in.erase(0, start);
}

void NodeLink::addPollFds(std::vector<pollfd> &fds) {
  polled.clear();
  if (listenFd >= 0) {
    fds.push_back({listenFd, POLLIN, 0});
    polled.push_back(nullptr);
  }
  for (auto &p : peers)
    if (!p->closed && !p->ending) {
      fds.push_back({p->fd, short(POLLIN | (p->out.empty() ? 0 : POLLOUT)), 0});
      polled.push_back(p.get());
    }
}

void NodeLink::step(ArrayRef<pollfd> fds, std::vector<NodeEvent> &events) {
  auto now = Clock::now();
  for (auto &p : peers)
    if (p->ending)
      drop(*p, "");
  for (size_t i = 0; i < fds.size() && i < polled.size(); ++i) {
    Peer *p = polled[i];
    if (!p) {
      if (!(fds[i].revents & POLLIN))
        continue;
      int fd;
      while ((fd = accept4(listenFd, nullptr, nullptr,
                           SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        auto np = std::make_unique<Peer>();
        np->fd = fd;
        np->lastHeard = now;
        np->helloBy = now + HelloWithin;
        peers.push_back(std::move(np));
      }
      continue;
    }
    if (p->closed)
      continue;
    if (fds[i].revents & POLLOUT)
      flush(p->fd, p->out);
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
      continue;
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        p->in.append(buf, n);
        p->lastHeard = now;
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        break;
      if (n == 0 && p->joined && cfg.nodeRank != 0) {
        if (p->why.empty())
          p->why = "its launcher's connection closed";
        p->ending = true;
        break;
      }
      drop(*p, n == 0 ? std::string("its launcher's connection closed")
                      : lostConnection(errno));
      break;
    }
    // Lines that arrived before a close still count: a failure report is
    // often the last thing a launcher sends.
    dispatchLines(*p, events);
    if (p->in.size() > 65536)
      drop(*p, "it sent a message that is not rlhf-run's");
  }

  if (now >= nextHeartbeat) {
    nextHeartbeat = now + HeartbeatEvery;
    broadcast("hb");
  }
  for (auto &p : peers)
    if (p->joined && !p->closed && now - p->lastHeard > cfg.nodeTimeout)
      drop(*p, formatv("no heartbeat for {0} s", cfg.nodeTimeout.count()));
  onTick(events);
  for (auto &p : peers)
    if (p->closed && !p->reported) {
      p->reported = true;
      onClosed(*p, events);
    }
  llvm::erase_if(peers, [](auto &p) { return p->closed && p->reported; });
}

void NodeLink::close(milliseconds bound, std::vector<NodeEvent> *late) {
  if (listenFd >= 0) {
    ::close(listenFd);
    listenFd = -1;
  }
  for (auto &p : peers)
    if (!p->closed) {
      send(*p, "bye");
      flush(p->fd, p->out);
      shutdown(p->fd, SHUT_WR);
    }
  // Read until each peer closes its end too, so nothing unread turns our
  // close into a reset that could discard the goodbye.
  auto deadline = Clock::now() + bound;
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Peer *> who;
    for (auto &p : peers)
      if (!p->closed) {
        fds.push_back({p->fd, POLLIN, 0});
        who.push_back(p.get());
      }
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (fds.empty() || left.count() <= 0)
      break;
    if (poll(fds.data(), fds.size(), int(left.count())) <= 0)
      continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents)
        continue;
      char buf[4096];
      ssize_t n = ::recv(fds[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0 && late && who[i]->joined) {
        who[i]->in.append(buf, size_t(n));
        std::vector<NodeEvent> events;
        dispatchLines(*who[i], events, [](StringRef line) {
          return line.starts_with("stopped ");
        });
        for (NodeEvent &e : events)
          if (e.kind == NodeEvent::Stopped)
            late->push_back(e);
      }
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        ::close(who[i]->fd);
        who[i]->closed = true;
      }
    }
  }
  for (auto &p : peers)
    if (!p->closed) {
      ::close(p->fd);
      p->closed = true;
    }
}
