#include "trainers/ps/ps_wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <thread>

#include "collectives/tcp_wire.h"

namespace troupe::ps::wire {
namespace {

using collectives::tcp::errno_text;
using collectives::tcp::ms_left;
using collectives::tcp::resolve;

// Waits until fd is ready for `events` or the deadline passes.
Status wait_for(int fd, short events, Clock::time_point deadline, const char* what) {
  while (true) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, ms_left(deadline));
    if (rc > 0) return {};
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return io_error(std::string("poll while ") + what + ": " + errno_text());
    return Status(Code::timeout, std::string("timed out ") + what);
  }
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::hello: return "hello";
    case Op::welcome: return "welcome";
    case Op::pull: return "pull";
    case Op::pull_final: return "pull_final";
    case Op::params: return "params";
    case Op::push: return "push";
    case Op::pushed: return "pushed";
    case Op::finish: return "finish";
    case Op::finished: return "finished";
    case Op::stats: return "stats";
    case Op::stats_reply: return "stats_reply";
    case Op::error: return "error";
    case Op::replay: return "replay";
    case Op::history: return "history";
    case Op::history_reply: return "history_reply";
  }
  return "unknown";
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // A peer that is gone without a word (its host cut off or powered down: no FIN, no RST) is found
  // by the kernel's keepalive probes about kKeepaliveIdleS + kKeepaliveCount x kKeepaliveIntervalS
  // after it last sent anything, instead of at the request's deadline (60 s); a live peer's kernel
  // answers them, however long its server makes a request wait.
  int idle = kKeepaliveIdleS, interval = kKeepaliveIntervalS, count = kKeepaliveCount;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  // Probes go out only while nothing is in flight; data sent and never acknowledged (a push to a
  // host that vanished) fails the connection after the same time.
  unsigned int unacked_ms = (kKeepaliveIdleS + kKeepaliveCount * kKeepaliveIntervalS) * 1000;
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &unacked_ms, sizeof unacked_ms);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

Expected<Socket> listen_on(const std::string& host, int port, int* bound_port) {
  auto addr = resolve(host, port);
  if (!addr) return addr.status();
  Socket s(::socket(AF_INET, SOCK_STREAM, 0));
  if (s.fd() < 0) return io_error("socket: " + errno_text());
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(sockaddr_in)) < 0 || ::listen(s.fd(), 128) < 0)
    return io_error("listening on " + host + ":" + std::to_string(port) + ": " + errno_text());
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  getsockname(s.fd(), reinterpret_cast<sockaddr*>(&bound), &len);
  fcntl(s.fd(), F_SETFL, fcntl(s.fd(), F_GETFL, 0) | O_NONBLOCK);
  *bound_port = ntohs(bound.sin_port);
  return s;
}

Expected<Socket> dial(const std::string& address, Clock::time_point deadline) {
  const auto colon = address.rfind(':');
  const int port = colon == std::string::npos ? 0 : std::atoi(address.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return invalid_argument("address '" + address + "' is not host:port");
  auto addr = resolve(address.substr(0, colon), port);
  if (!addr) return addr.status();
  std::string last = "no attempt";
  while (true) {
    Socket s(::socket(AF_INET, SOCK_STREAM, 0));
    if (s.fd() < 0) return io_error("socket: " + errno_text());
    tune(s.fd());
    int rc = ::connect(s.fd(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(sockaddr_in));
    if (rc < 0 && errno == EINPROGRESS) {
      errno = ETIMEDOUT;
      pollfd p{s.fd(), POLLOUT, 0};
      if (::poll(&p, 1, ms_left(deadline)) > 0) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      }
    }
    if (rc == 0) return s;
    last = errno_text();
    if (Clock::now() >= deadline) return unavailable("could not connect to " + address + ": " + last);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status write_frame(int fd, const Header& h, const void* payload, Clock::time_point deadline, const void* tail,
                   uint64_t tail_bytes) {
  if (!tail) tail_bytes = 0;
  const uint64_t head_bytes = payload ? h.payload - tail_bytes : 0;
  iovec iov[3];
  int count = 0;
  iov[count++] = {const_cast<Header*>(&h), sizeof h};
  if (head_bytes) iov[count++] = {const_cast<void*>(payload), head_bytes};
  if (tail_bytes) iov[count++] = {const_cast<void*>(tail), tail_bytes};
  int first = 0;
  while (first < count) {
    msghdr m{};
    m.msg_iov = iov + first;
    m.msg_iovlen = static_cast<size_t>(count - first);
    const ssize_t k = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        TROUPE_RETURN_IF_ERROR(wait_for(fd, POLLOUT, deadline, "sending a frame"));
        continue;
      }
      if (errno == EPIPE || errno == ECONNRESET) return unavailable("the peer closed the connection");
      if (errno == ETIMEDOUT || errno == EHOSTUNREACH)
        return unavailable("the peer stopped answering (" + errno_text() + "): its host is gone or cut off");
      return io_error("send: " + errno_text());
    }
    size_t left = static_cast<size_t>(k);
    while (first < count && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < count) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return {};
}

Status read_exact(int fd, void* p, size_t n, Clock::time_point deadline, size_t* got) {
  char* c = static_cast<char*>(p);
  size_t done = 0;
  auto fail = [&](Status st) {
    if (got) *got = done;
    return st;
  };
  while (done < n) {
    const ssize_t k = ::recv(fd, c + done, n - done, 0);
    if (k > 0) {
      done += static_cast<size_t>(k);
      continue;
    }
    if (k == 0)
      return fail(unavailable("the peer closed the connection" +
                              (done ? " in the middle of a frame (" + std::to_string(done) + " of " +
                                          std::to_string(n) + " bytes)"
                                    : std::string())));
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      Status st = wait_for(fd, POLLIN, deadline, "waiting for a frame");
      if (!st.ok()) return fail(st);
      continue;
    }
    if (errno == ECONNRESET) return fail(unavailable("the peer reset the connection"));
    if (errno == ETIMEDOUT || errno == EHOSTUNREACH)
      return fail(unavailable("the peer stopped answering (" + errno_text() + "): its host is gone or cut off"));
    return fail(io_error("recv: " + errno_text()));
  }
  if (got) *got = done;
  return {};
}

Status read_header(int fd, Header* h, Clock::time_point deadline, size_t* got) {
  TROUPE_RETURN_IF_ERROR(read_exact(fd, h, sizeof *h, deadline, got));
  if (h->magic != kMagic) {
    char text[96];
    std::snprintf(text, sizeof text, "a frame with bad magic 0x%08x (want 0x%08x)", h->magic, kMagic);
    return corrupt_data(std::string(text) + ": not a troupe parameter-server peer, or the stream is out of step");
  }
  return {};
}

Status read_spans(int fd, int32_t n, DataTag* tag, Clock::time_point deadline) {
  tag->assign(static_cast<size_t>(std::max(n, 0)), DataSpan{});
  return read_exact(fd, tag->data(), tag->size() * sizeof(DataSpan), deadline);
}

std::vector<char> encode_history(const std::vector<TaggedPush>& pushes) {
  size_t spans = 0;
  for (const TaggedPush& p : pushes) spans += p.tag.size();
  std::vector<char> out(pushes.size() * sizeof(HistoryEntry) + spans * sizeof(DataSpan));
  char* at = out.data();
  for (const TaggedPush& p : pushes) {
    const HistoryEntry e{p.clock, static_cast<int32_t>(p.tag.size()), 0};
    std::memcpy(at, &e, sizeof e);
    at += sizeof e;
  }
  for (const TaggedPush& p : pushes) {
    if (p.tag.empty()) continue;
    std::memcpy(at, p.tag.data(), p.tag.size() * sizeof(DataSpan));
    at += p.tag.size() * sizeof(DataSpan);
  }
  return out;
}

Status read_history(int fd, const Header& h, std::vector<TaggedPush>* pushes, Clock::time_point deadline) {
  const auto bad = [&](const std::string& what) {
    return corrupt_data("a history reply of " + std::to_string(h.spans) + " pushes and " + std::to_string(h.payload) +
                        " bytes: " + what);
  };
  if (h.spans < 0 || h.spans > kMaxHistory) return bad("too many pushes");
  const uint64_t head = static_cast<uint64_t>(h.spans) * sizeof(HistoryEntry);
  if (h.payload < head) return bad("shorter than its entries");
  std::vector<HistoryEntry> entries(static_cast<size_t>(h.spans));
  TROUPE_RETURN_IF_ERROR(read_exact(fd, entries.data(), head, deadline));
  uint64_t spans = 0;
  for (const HistoryEntry& e : entries) {
    if (e.spans < 0 || e.spans > kMaxSpans) return bad("a push of " + std::to_string(e.spans) + " spans");
    spans += static_cast<uint64_t>(e.spans);
  }
  if (h.payload != head + spans * sizeof(DataSpan)) return bad("its spans do not fill it");
  pushes->clear();
  for (const HistoryEntry& e : entries) {
    TaggedPush p;
    p.clock = e.clock;
    TROUPE_RETURN_IF_ERROR(read_spans(fd, e.spans, &p.tag, deadline));
    pushes->push_back(std::move(p));
  }
  return {};
}

Header error_header(const Status& st) {
  Header h;
  h.op = Op::error;
  h.code = static_cast<uint8_t>(st.code());
  h.payload = std::min<uint64_t>(st.message().size(), kMaxErrorText);
  return h;
}

Status error_status(const Header& h, const std::string& text) {
  Code code = static_cast<Code>(h.code);
  if (code == Code::ok || code > Code::internal) code = Code::internal;
  return Status(code, text);
}

}  // namespace troupe::ps::wire
