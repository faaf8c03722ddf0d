//===- NodeLink.cpp - launchers of a job watch each other -----------------===//
//
// Messages, one per line:
//   rlhf-run/1 hello NODE NNODES NPROC   another node introduces itself
//   welcome | reject TEXT                node 0's answer
//   hb                                   heartbeat, both ways, every second
//   fail [NODE] RANK STATUS              a worker failed (node 0 adds NODE)
//   signal [NODE] SIG                    a launcher got a signal
//   error TEXT                           node 0 lost a node: stop
//   done | end                           a node's workers exited 0 | all did
//   bye                                  orderly close
//
//===----------------------------------------------------------------------===//

#include "NodeLink.h"

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
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

static constexpr const char *Hello = "rlhf-run/1 hello";
static constexpr seconds HeartbeatEvery{1};
/// A connection that does not say hello within this is not a launcher.
static constexpr seconds HelloWithin{10};

struct NodeLink::Peer {
  int fd = -1;
  int node = -1; ///< -1 until it introduced itself
  std::string in, out;
  Clock::time_point lastHeard, helloBy;
  bool joined = false, done = false, saidBye = false;
  bool closed = false, reported = false;
  std::string why; ///< why the connection ended, unless saidBye
};

std::string rlhfrun::describeNode(unsigned node, unsigned nproc) {
  if (nproc == 1)
    return formatv("node {0} (rank {0})", node).str();
  return formatv("node {0} (ranks {1}-{2})", node, node * nproc,
                 node * nproc + nproc - 1)
      .str();
}

NodeLink::NodeLink(const LinkConfig &cfg)
    : cfg(cfg), nextHeartbeat(Clock::now()) {}

NodeLink::~NodeLink() {
  for (auto &p : peers)
    if (!p->closed)
      ::close(p->fd);
  if (listenFd >= 0)
    ::close(listenFd);
}

namespace {

bool flush(int fd, std::string &out) {
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

std::vector<StringRef> words(StringRef line) {
  SmallVector<StringRef, 8> w;
  line.split(w, ' ', -1, false);
  return {w.begin(), w.end()};
}

} // namespace

void NodeLink::send(Peer &p, const std::string &line) {
  if (p.closed)
    return;
  p.out += line;
  p.out += '\n';
  if (!flush(p.fd, p.out) && p.why.empty())
    p.why = formatv("its launcher's connection broke: {0}", strerror(errno));
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

void NodeLink::addPollFds(std::vector<pollfd> &fds) {
  polled.clear();
  if (listenFd >= 0) {
    fds.push_back({listenFd, POLLIN, 0});
    polled.push_back(nullptr);
  }
  for (auto &p : peers)
    if (!p->closed) {
      fds.push_back({p->fd, short(POLLIN | (p->out.empty() ? 0 : POLLOUT)), 0});
      polled.push_back(p.get());
    }
}

void NodeLink::step(ArrayRef<pollfd> fds, std::vector<NodeEvent> &events) {
  auto now = Clock::now();
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
      drop(*p, n == 0 ? std::string("its launcher's connection closed")
                      : formatv("its launcher's connection broke: {0}",
                                strerror(errno))
                            .str());
      break;
    }
    // Lines that arrived before a close still count: a failure report is
    // often the last thing a launcher sends.
    size_t start = 0, nl;
    while ((nl = p->in.find('\n', start)) != std::string::npos) {
      onLine(*p, StringRef(p->in).slice(start, nl), events);
      start = nl + 1;
    }
    p->in.erase(0, start);
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

void NodeLink::close(milliseconds bound) {
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
  }
  int &fd() { return listenFd; }

  void reportFailure(int rank, int status) override {
    broadcast(formatv("fail 0 {0} {1}", rank, status).str());
  }
  void reportSignal(int sig) override {
    broadcast(formatv("signal 0 {0}", sig).str());
  }
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
    unsigned node = unsigned(p.node);
    if (w[0] == "fail" && w.size() == 3) {
      NodeEvent e{NodeEvent::WorkerFailed};
      e.node = node;
      if (w[1].getAsInteger(10, e.rank) || w[2].getAsInteger(10, e.status))
        return;
      events.push_back(e);
      broadcast(formatv("fail {0} {1} {2}", node, e.rank, e.status).str(), &p);
    } else if (w[0] == "signal" && w.size() == 2) {
      NodeEvent e{NodeEvent::Signal};
      e.node = node;
      if (w[1].getAsInteger(10, e.status))
        return;
      events.push_back(e);
      broadcast(formatv("signal {0} {1}", node, e.status).str(), &p);
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
    if (!line.starts_with(Hello) || w.size() != 5 ||
        w[2].getAsInteger(10, node) || w[3].getAsInteger(10, nnodes) ||
        w[4].getAsInteger(10, nproc)) {
      drop(p, ""); // not a launcher: drop it quietly
      return;
    }
    std::string problem;
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
    if (w[0] == "fail" && w.size() == 4) {
      NodeEvent e{NodeEvent::WorkerFailed};
      if (w[1].getAsInteger(10, e.node) || w[2].getAsInteger(10, e.rank) ||
          w[3].getAsInteger(10, e.status))
        return;
      events.push_back(e);
    } else if (w[0] == "signal" && w.size() == 3) {
      NodeEvent e{NodeEvent::Signal};
      if (w[1].getAsInteger(10, e.node) || w[2].getAsInteger(10, e.status))
        return;
      events.push_back(e);
    } else if (w[0] == "error") {
      NodeEvent e{NodeEvent::Error};
      e.message = line.drop_front(6).str();
      events.push_back(e);
    } else if (w[0] == "end") {
      events.push_back(NodeEvent{NodeEvent::JobDone});
    } else if (w[0] == "bye") {
      p.saidBye = true;
      drop(p, "");
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
  void reportFailure(int rank, int status) override {
    broadcast(formatv("fail {0} {1}", rank, status).str());
  }
  void reportSignal(int sig) override {
    broadcast(formatv("signal {0}", sig).str());
  }
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
  client->send(hub, formatv("{0} {1} {2} {3}", Hello, cfg.nodeRank, cfg.nnodes,
                            cfg.nproc)
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
