// Forming the TCP mesh: listeners, dialling with retries, and the handshake that makes sure every
// connection joins ranks of the same group and generation.
//
// Handshake: the dialling (higher) rank sends a Hello and the group name; the accepting (lower)
// rank answers with a Verdict and, when it refuses, the reason as text. A connection from another
// group or generation is refused — never joined — and the dialler fails at once with that reason,
// while the acceptor keeps waiting for the right member and quotes the refusal if its deadline
// passes ("a rank of group 'dp' generation 3 connected to group 'dp' generation 4: stale member").
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <thread>

#include "collectives/tcp_transport.h"
#include "tls/tls_relay.h"
#include "collectives/tcp_wire.h"

namespace troupe::collectives {

namespace {

using tcp::errno_text;
using tcp::ms_left;
using tcp::resolve;

constexpr uint32_t kHelloMagic = 0x74727032;  // "trp2": handshake version 2 (framed data)
constexpr size_t kMaxGroupName = 255;

struct Hello {
  uint32_t magic = kHelloMagic;
  uint32_t rank = 0;
  uint32_t size = 0;
  uint32_t name_bytes = 0;  // the group name follows the Hello
  int64_t generation = 0;
};

struct Verdict {
  uint32_t magic = kHelloMagic;
  uint32_t accepted = 0;
  uint32_t reason_bytes = 0;  // the refusal's text follows the Verdict
  uint32_t reserved = 0;
};

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

Expected<sockaddr_in> parse_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) return invalid_argument("address '" + address + "' is not host:port");
  int port = std::atoi(address.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return invalid_argument("address '" + address + "' has no valid port");
  return resolve(address.substr(0, colon), port);
}

// Writes or reads exactly n bytes on a nonblocking socket by the deadline; `peer` names the other
// end in errors ("rank 3", "a connecting rank").
Status transfer(int fd, bool write, void* p, size_t n, const std::string& peer, Clock::time_point deadline) {
  char* c = static_cast<char*>(p);
  for (size_t done = 0; done < n;) {
    ssize_t k = write ? ::send(fd, c + done, n - done, MSG_NOSIGNAL) : ::recv(fd, c + done, n - done, 0);
    if (k > 0) {
      done += static_cast<size_t>(k);
      continue;
    }
    if (k == 0) return unavailable(peer + " closed the connection during the handshake (tcp)");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return unavailable("handshake with " + peer + " failed: " + errno_text() + " (tcp)");
    pollfd pf{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    if (::poll(&pf, 1, ms_left(deadline)) == 0)
      return Status(Code::timeout, peer + " did not complete the handshake before the deadline (tcp)");
  }
  return {};
}

std::string group_text(const std::string& name, int64_t generation) {
  return "group '" + name + "' generation " + std::to_string(generation);
}

// Why a connecting rank of `name`/`generation` may not join ours; empty when it may.
std::string refusal(const std::string& name, int64_t generation, const TcpGroupOptions& ours) {
  if (name == ours.group && generation == ours.generation) return "";
  std::string text = "a rank of " + group_text(name, generation) + " connected to " +
                     group_text(ours.group, ours.generation) + ": ";
  if (name != ours.group) return text + "another group; check the group name and the addresses it was given";
  if (generation < ours.generation) return text + "stale member, re-form the group";
  return text + "this group is stale, re-form it at generation " + std::to_string(generation);
}

// Dials `address` until it accepts or the deadline passes (the peer may not listen yet).
Expected<int> dial(const std::string& address, int peer, Clock::time_point deadline) {
  auto addr = parse_address(address);
  if (!addr) return addr.status();
  while (true) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return io_error("socket: " + errno_text());
    tune(fd);
    int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(sockaddr_in));
    if (rc < 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, ms_left(deadline)) > 0) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
      }
    }
    if (rc == 0) return fd;
    ::close(fd);
    if (Clock::now() >= deadline)
      return Status(Code::timeout, "rank " + std::to_string(peer) + " at " + address + " did not accept a connection");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The dialler's half: introduce ourselves to `peer` on `fd` and wait for its verdict.
Status introduce(int fd, int rank, int size, int peer, const TcpGroupOptions& o, Clock::time_point deadline) {
  const std::string who = "rank " + std::to_string(peer);
  Hello hello;
  hello.rank = static_cast<uint32_t>(rank);
  hello.size = static_cast<uint32_t>(size);
  hello.name_bytes = static_cast<uint32_t>(o.group.size());
  hello.generation = o.generation;
  std::string bytes(reinterpret_cast<const char*>(&hello), sizeof hello);
  bytes += o.group;
  TROUPE_RETURN_IF_ERROR(transfer(fd, true, bytes.data(), bytes.size(), who, deadline));
  Verdict v;
  TROUPE_RETURN_IF_ERROR(transfer(fd, false, &v, sizeof v, who, deadline));
  if (v.magic != kHelloMagic)
    return Status(Code::version_mismatch,
                  who + " answered the handshake with an unknown magic: is it another troupe version? (tcp)");
  if (v.accepted) return {};
  std::string reason(std::min<uint32_t>(v.reason_bytes, 4096), '\0');
  TROUPE_RETURN_IF_ERROR(transfer(fd, false, reason.data(), reason.size(), who, deadline));
  return invalid_argument(who + " refused this rank: " + reason + " (tcp)");
}

// The acceptor's half: reads a Hello on `fd`; returns the connecting rank, or -1 after refusing
// it (the refusal's text goes to *refused).
int admit(int fd, int rank, int size, const std::vector<int>& fds, const TcpGroupOptions& o,
          Clock::time_point deadline, std::string* refused) {
  Hello hello;
  const std::string who = "a connecting rank";
  // A connection that never says hello must not hold up the members behind it.
  deadline = std::min(deadline, Clock::now() + std::chrono::seconds(5));
  if (!transfer(fd, false, &hello, sizeof hello, who, deadline).ok() || hello.magic != kHelloMagic ||
      hello.name_bytes > kMaxGroupName)
    return -1;  // not a troupe peer of this version: drop it silently and keep waiting
  std::string name(hello.name_bytes, '\0');
  if (!transfer(fd, false, name.data(), name.size(), who, deadline).ok()) return -1;
  const int peer = static_cast<int>(hello.rank);
  std::string reason = refusal(name, hello.generation, o);
  if (reason.empty() && static_cast<int>(hello.size) != size)
    reason = "a rank of a group of " + std::to_string(hello.size) + " connected to a group of " +
             std::to_string(size) + " (" + group_text(o.group, o.generation) + ")";
  if (reason.empty() && (peer <= rank || peer >= size))
    reason = "rank " + std::to_string(peer) + " dialled rank " + std::to_string(rank) +
             "; only ranks above it dial it in a group of " + std::to_string(size);
  if (reason.empty() && fds[peer] >= 0) reason = "rank " + std::to_string(peer) + " is already connected";
  Verdict v;
  v.accepted = reason.empty() ? 1 : 0;
  v.reason_bytes = static_cast<uint32_t>(reason.size());
  std::string bytes(reinterpret_cast<const char*>(&v), sizeof v);
  bytes += reason;
  Status sent = transfer(fd, true, bytes.data(), bytes.size(), who, deadline);
  if (!reason.empty()) *refused = reason;
  return reason.empty() && sent.ok() ? peer : -1;
}

}  // namespace

Expected<TcpListener> TcpListener::open(const std::string& host, int port) {
  auto addr = resolve(host, port);
  if (!addr) return addr.status();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return io_error("socket: " + errno_text());
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(sockaddr_in)) < 0 || ::listen(fd, 128) < 0) {
    Status st = io_error("listening on " + host + ":" + std::to_string(port) + ": " + errno_text());
    ::close(fd);
    return st;
  }
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
  return TcpListener(fd, ntohs(bound.sin_port));
}

TcpListener::TcpListener(TcpListener&& other) noexcept : fd_(other.fd_), port_(other.port_) { other.fd_ = -1; }
TcpListener& TcpListener::operator=(TcpListener&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    port_ = other.port_;
    other.fd_ = -1;
  }
  return *this;
}
TcpListener::~TcpListener() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<std::unique_ptr<Transport>> connect_tcp_group(int rank, TcpListener listener,
                                                      const std::vector<std::string>& addresses,
                                                      const TcpGroupOptions& options) {
  const int size = static_cast<int>(addresses.size());
  const std::string self = "rank " + std::to_string(rank) + " of " + group_text(options.group, options.generation);
  if (rank < 0 || rank >= size)
    return invalid_argument("rank " + std::to_string(rank) + " is not in a group of " + std::to_string(size));
  if (options.group.size() > kMaxGroupName)
    return invalid_argument(self + ": the group name is longer than " + std::to_string(kMaxGroupName) + " bytes");
  const Clock::time_point deadline = Clock::now() + options.timeout;
  std::vector<int> fds(size, -1);
  auto give_up = [&fds](Status st) {
    for (int& fd : fds)
      if (fd >= 0) ::close(fd);
    return st;
  };
  // Dial every lower rank and introduce ourselves.
  for (int peer = 0; peer < rank; ++peer) {
    auto fd = dial(addresses[peer], peer, deadline);
    if (fd && options.tls)
      fd = tls::wrap(*fd, *options.tls, tls::Role::client, std::chrono::milliseconds(ms_left(deadline)),
                     "rank " + std::to_string(peer) + " at " + addresses[peer]);
    if (!fd) return give_up(fd.status().with_context(self + " forming a tcp group"));
    fds[peer] = *fd;
    Status st = introduce(*fd, rank, size, peer, options, deadline);
    if (!st.ok()) return give_up(st.with_context(self + " forming a tcp group"));
  }
  // Accept every higher rank; each says who it is, and only members of this group and generation join.
  std::string refused;
  for (int accepted = 0; accepted < size - 1 - rank;) {
    pollfd p{listener.fd(), POLLIN, 0};
    if (::poll(&p, 1, ms_left(deadline)) <= 0) {
      std::string missing;
      for (int peer = rank + 1; peer < size; ++peer)
        if (fds[peer] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
      return give_up(Status(Code::timeout, self + " forming a tcp group: rank(s) " + missing +
                                               " did not connect before the deadline" +
                                               (refused.empty() ? "" : "; refused: " + refused)));
    }
    int fd = ::accept(listener.fd(), nullptr, nullptr);
    if (fd < 0) continue;
    tune(fd);
    if (options.tls) {
      // A connection that is not a member of the cluster (its certificate refused) is not a rank.
      auto plain = tls::wrap(fd, *options.tls, tls::Role::server, std::chrono::milliseconds(ms_left(deadline)),
                             "a connecting rank");
      if (!plain) {
        refused += (refused.empty() ? "" : "; ") + plain.status().message();
        continue;
      }
      fd = *plain;
    }
    const int peer = admit(fd, rank, size, fds, options, deadline, &refused);
    if (peer < 0) {
      ::close(fd);
      continue;
    }
    fds[peer] = fd;
    ++accepted;
  }
  return tcp::make_transport(rank, std::move(fds));
}

}  // namespace troupe::collectives
