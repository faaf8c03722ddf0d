//===- NodeLinkRoles.cpp - node 0's hub and the other nodes' clients ------===//
//
// Node 0 listens, admits each node once by its hello and reports the first
// node it loses; the others connect to it, retrying until the join timeout.
// The protocol is in NodeLink.cpp.
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

//===----------------------------------------------------------------------===//
// Node 0
//===----------------------------------------------------------------------===//

namespace {

class Hub : public NodeLink {
public:
  explicit Hub(const LinkConfig &cfg)
      : NodeLink(cfg), joinBy(Clock::now() + cfg.joinTimeout),
        everJoined(cfg.nnodes, false) {
    everJoined[0] = true;
    hub = true;
  }
  int &fd() { return listenFd; }

  void reportDone() override { localDone = true; }

protected:
  void onLine(Peer &p, StringRef line,
              std::vector<NodeEvent> &events) override {
    auto w = words(line);
    if (!p.joined) {
      welcome(p, line, w, events);
      return;
    }
    if (w.empty())
      return;
    if (std::optional<NodeEvent> e = parseEvent(w, /*withNode=*/false)) {
      // Passed on to the other nodes with the node it came from.
      e->node = unsigned(p.node);
      events.push_back(*e);
      broadcast(eventLine(*e, /*withNode=*/true), &p);
    } else if (w[0] == "done") {
      p.done = true;
    } else if (w[0] == "bye") {
      p.saidBye = true;
      drop(p, "");
    }
  }

  void welcome(Peer &p, StringRef line, ArrayRef<StringRef> w,
               std::vector<NodeEvent> &events) {
    unsigned node = 0, nnodes = 0, nproc = 0;
    std::string problem;
    if (!line.starts_with(Hello) || w.size() != 6 ||
        w[2].getAsInteger(10, node) || w[3].getAsInteger(10, nnodes) ||
        w[4].getAsInteger(10, nproc)) {
      if (!line.starts_with(HelloAnyVersion)) {
        drop(p, ""); // not a launcher: drop it quietly
        return;
      }
      // Refused rather than dropped: it would wait for an answer.
      send(p, "reject node 0's launcher is another version of rlhf-run; "
              "start every node with the same rlhfc build");
      flush(p.fd, p.out);
      drop(p, "");
      return;
    }
    if (nnodes != cfg.nnodes)
      problem = formatv("node {0} was started with --nnodes {1}, node 0 "
                        "with --nnodes {2}",
                        node, nnodes, cfg.nnodes);
    else if (nproc != cfg.nproc)
      problem = formatv("node {0} runs {1} workers (-n {1}), node 0 runs {2}; "
                        "every node must run the same number",
                        node, nproc, cfg.nproc);
    else if (node == 0 || node >= cfg.nnodes)
      problem =
          formatv("a launcher joined as node {0}; node 0 is this one", node);
    else if (everJoined[node])
      problem = formatv("two launchers joined as node {0}", node);
    else if (w[5] != argsDigest(cfg.programArgs))
      problem = formatv("node {0} runs the program with other arguments than "
                        "node 0 ({1}); start every node with the same ones",
                        node,
                        cfg.programArgs.empty()
                            ? std::string("none")
                            : "'" + llvm::join(cfg.programArgs, " ") + "'");
    if (!problem.empty()) {
      send(p, "reject " + problem);
      flush(p.fd, p.out);
      drop(p, "");
      // The job cannot run as started: end it here too.
      NodeEvent e{NodeEvent::Error};
      e.node = node;
      e.message = problem;
      events.push_back(e);
      broadcast("error " + problem);
      return;
    }
    p.node = int(node);
    p.joined = true;
    everJoined[node] = true;
    send(p, "welcome");
  }

  void onClosed(Peer &p, std::vector<NodeEvent> &events) override {
    if (!p.joined)
      return;
    NodeEvent e{NodeEvent::Error};
    e.node = unsigned(p.node);
    e.orderly = p.saidBye;
    std::string name = describeNode(e.node, cfg.nproc);
    if (p.saidBye) {
      e.message = name + " stopped";
    } else {
      e.message = name + " stopped responding (" + p.why + ")";
      broadcast("error " + e.message);
    }
    events.push_back(e);
  }

  void onTick(std::vector<NodeEvent> &events) override {
    auto now = Clock::now();
    for (auto &p : peers)
      if (!p->joined && !p->closed && now > p->helloBy)
        drop(*p, "");
    if (!joinReported && now > joinBy) {
      std::vector<std::string> missing;
      for (unsigned n = 1; n < cfg.nnodes; ++n)
        if (!everJoined[n])
          missing.push_back(describeNode(n, cfg.nproc));
      if (!missing.empty()) {
        joinReported = true;
        NodeEvent e{NodeEvent::Error};
        e.message = formatv("{0} did not join within {1} s; start "
                            "rlhf-run on every node with the same --nnodes, "
                            "--master-addr and --master-port",
                            llvm::join(missing, ", "), cfg.joinTimeout.count());
        events.push_back(e);
        broadcast("error " + e.message);
      }
    }
    if (localDone && !ended) {
      unsigned done = 0;
      for (auto &p : peers)
        done += p->joined && p->done && !p->closed;
      if (done + 1 == cfg.nnodes) {
        ended = true;
        broadcast("end");
        events.push_back(NodeEvent{NodeEvent::JobDone});
      }
    }
  }

private:
  Clock::time_point joinBy;
  std::vector<bool> everJoined;
  bool localDone = false, joinReported = false, ended = false;
};

//===----------------------------------------------------------------------===//
// The other nodes
//===----------------------------------------------------------------------===//

class Client : public NodeLink {
public:
  explicit Client(const LinkConfig &cfg) : NodeLink(cfg) {}
  Peer &hub() { return *peers.front(); }
  void addHub(int fd) {
    auto p = std::make_unique<Peer>();
    p->fd = fd;
    p->node = 0;
    p->joined = true;
    p->lastHeard = Clock::now();
    peers.push_back(std::move(p));
  }

protected:
  void onLine(Peer &p, StringRef line,
              std::vector<NodeEvent> &events) override {
    auto w = words(line);
    if (w.empty())
      return;
    if (std::optional<NodeEvent> e = parseEvent(w, /*withNode=*/true)) {
      events.push_back(*e);
    } else if (w[0] == "error") {
      NodeEvent e{NodeEvent::Error};
      e.message = line.drop_front(6).str();
      events.push_back(e);
    } else if (w[0] == "end") {
      events.push_back(NodeEvent{NodeEvent::JobDone});
    } else if (w[0] == "bye") {
      p.saidBye = true;
      p.ending = true; // still answerable this step
    }
  }

  void onClosed(Peer &p, std::vector<NodeEvent> &events) override {
    NodeEvent e{NodeEvent::Error};
    e.orderly = p.saidBye;
    e.message = p.saidBye ? "node 0's launcher exited"
                          : describeNode(0, cfg.nproc) +
                                " stopped responding (" + p.why + ")";
    events.push_back(e);
  }

  void onTick(std::vector<NodeEvent> &) override {}

public:
  void reportDone() override { broadcast("done"); }
};

Error failure(const Twine &msg) {
  return createStringError(inconvertibleErrorCode(), msg);
}

/// Waits up to `ms` for `fd` to be ready for `events`; false when
/// `interruptFd` became readable first.
bool waitFor(int fd, short events, int interruptFd, int ms, bool &ready) {
  pollfd fds[2] = {{interruptFd, POLLIN, 0}, {fd, events, 0}};
  int n = poll(fds, fd >= 0 ? 2 : 1, ms);
  ready = n > 0 && fd >= 0 && fds[1].revents;
  return !(n > 0 && (fds[0].revents & POLLIN));
}

} // namespace

Expected<std::unique_ptr<NodeLink>> NodeLink::listen(const LinkConfig &cfg) {
  auto hub = std::make_unique<Hub>(cfg);
  // Every interface, as the store does: --master-addr may name this host
  // by any of its addresses or names.
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int err = 0;
  if (fd >= 0) {
    int no = 0, yes = 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(uint16_t(cfg.port));
    if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
      err = errno;
      ::close(fd);
      fd = -1;
    }
  }
  if (fd < 0 && err != EADDRINUSE) { // no IPv6 here: IPv4 alone
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(uint16_t(cfg.port));
    err = 0;
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
      err = errno;
      if (fd >= 0)
        ::close(fd);
      fd = -1;
    }
  }
  if (fd < 0 || ::listen(fd, 64) != 0)
    return failure(formatv("cannot listen on port {0} for the other nodes' "
                           "launchers: {1}; choose another with "
                           "--monitor-port (the same on every node)",
                           cfg.port, strerror(fd < 0 ? err : errno)));
  hub->fd() = fd;
  return std::unique_ptr<NodeLink>(std::move(hub));
}

Expected<std::unique_ptr<NodeLink>> NodeLink::join(const LinkConfig &cfg,
                                                   int interruptFd) {
  std::string where = formatv("{0}:{1}", cfg.masterAddr, cfg.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *res = nullptr;
  std::string port = std::to_string(cfg.port);
  if (int rc = getaddrinfo(cfg.masterAddr.c_str(), port.c_str(), &hints, &res))
    return failure("cannot resolve node 0's address '" + cfg.masterAddr +
                   "': " + gai_strerror(rc));
  auto start = Clock::now();
  auto deadline = start + cfg.joinTimeout;
  bool noted = false;
  std::string lastError = "no address";
  int fd = -1;
  while (fd < 0) {
    for (addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
      int s =
          socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                 ai->ai_protocol);
      if (s < 0)
        continue;
      bool ready = false;
      int rc = connect(s, ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        if (!waitFor(s, POLLOUT, interruptFd, 1000, ready)) {
          ::close(s);
          freeaddrinfo(res);
          return failure("interrupted");
        }
        int soErr = ETIMEDOUT;
        socklen_t len = sizeof(soErr);
        if (ready)
          getsockopt(s, SOL_SOCKET, SO_ERROR, &soErr, &len);
        rc = soErr ? -1 : 0;
        errno = soErr;
      }
      if (rc == 0) {
        fd = s;
        break;
      }
      lastError = strerror(errno);
      ::close(s);
    }
    if (fd >= 0)
      break;
    auto now = Clock::now();
    if (now >= deadline) {
      freeaddrinfo(res);
      return failure(formatv("cannot reach node 0's launcher at {0} within "
                             "{1} s: {2}",
                             where, cfg.joinTimeout.count(), lastError));
    }
    if (!noted && now - start > seconds(5)) {
      noted = true;
      errs() << formatv("rlhf-run: node {0}: waiting for node 0's launcher "
                        "at {1} ({2})\n",
                        cfg.nodeRank, where, lastError);
    }
    bool ready;
    if (!waitFor(-1, 0, interruptFd, 250, ready)) {
      freeaddrinfo(res);
      return failure("interrupted");
    }
  }
  freeaddrinfo(res);

  auto client = std::make_unique<Client>(cfg);
  client->addHub(fd);
  Peer &hub = client->hub();
  client->send(hub, formatv("{0} {1} {2} {3} {4}", Hello, cfg.nodeRank,
                            cfg.nnodes, cfg.nproc, argsDigest(cfg.programArgs))
                        .str());
  // Node 0's launcher answers from its loop at once; a bound in case
  // something else listens on that port.
  auto answerBy = std::max(deadline, Clock::now() + seconds(10));
  for (;;) {
    size_t nl = hub.in.find('\n');
    if (nl != std::string::npos) {
      StringRef line = StringRef(hub.in).take_front(nl);
      if (line == "welcome")
        break;
      if (line.consume_front("reject "))
        return failure(line);
      return failure("the program at " + where +
                     " is not node 0's rlhf-run launcher");
    }
    auto left =
        std::chrono::duration_cast<milliseconds>(answerBy - Clock::now());
    if (left.count() <= 0)
      return failure("node 0's launcher at " + where +
                     " did not answer; is another program on that port?");
    bool ready = false;
    if (!waitFor(fd, POLLIN, interruptFd, int(left.count()), ready))
      return failure("interrupted");
    if (!ready)
      continue;
    char buf[512];
    ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      return failure("node 0's launcher at " + where +
                     " closed the connection before answering");
    if (n > 0)
      hub.in.append(buf, n);
  }
  hub.in.erase(0, hub.in.find('\n') + 1);
  hub.lastHeard = Clock::now();
  return std::unique_ptr<NodeLink>(std::move(client));
}
