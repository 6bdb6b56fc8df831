#include "collectives/tcp_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace troupe::collectives {

namespace {

constexpr uint32_t kMagic = 0x74727063;  // "trpc": the handshake's first word

std::string errno_text() { return std::strerror(errno); }

// Milliseconds left until `deadline`, rounded up, for poll().
int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>((left + 999) / 1000);
}

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

Expected<sockaddr_in> resolve(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) return addr;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr)
    return invalid_argument("cannot resolve host '" + host + "'");
  addr.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return addr;
}

Expected<sockaddr_in> parse_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) return invalid_argument("address '" + address + "' is not host:port");
  int port = std::atoi(address.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return invalid_argument("address '" + address + "' has no valid port");
  return resolve(address.substr(0, colon), port);
}

// Moves `sn` bytes out on `send_fd` and `rn` bytes in from `recv_fd` (either may be 0), both at once.
Status pump(int send_fd, const char* sp, size_t sn, int to, int recv_fd, char* rp, size_t rn, int from,
            Clock::time_point deadline) {
  size_t sent = 0, got = 0;
  while (sent < sn || got < rn) {
    pollfd fds[2];
    int n = 0, si = -1, ri = -1;
    if (sent < sn) {
      fds[n] = {send_fd, POLLOUT, 0};
      si = n++;
    }
    if (got < rn) {
      if (si >= 0 && send_fd == recv_fd) {
        fds[si].events |= POLLIN;
        ri = si;
      } else {
        fds[n] = {recv_fd, POLLIN, 0};
        ri = n++;
      }
    }
    int ready = ::poll(fds, n, ms_left(deadline));
    if (ready < 0 && errno != EINTR) return io_error("poll: " + errno_text());
    if (ready == 0) {
      if (got < rn)
        return Status(Code::timeout, "rank " + std::to_string(from) + " sent " + std::to_string(got) + " of " +
                                         std::to_string(rn) + " bytes before the deadline (tcp)");
      return Status(Code::timeout, "rank " + std::to_string(to) + " accepted " + std::to_string(sent) + " of " +
                                       std::to_string(sn) + " bytes before the deadline (tcp)");
    }
    if (ready < 0) continue;
    if (si >= 0 && (fds[si].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t k = ::send(send_fd, sp + sent, sn - sent, MSG_NOSIGNAL);
      if (k > 0) {
        sent += static_cast<size_t>(k);
      } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return unavailable("connection to rank " + std::to_string(to) + " closed: " + errno_text() + " (tcp)");
      }
    }
    if (ri >= 0 && (fds[ri].revents & (POLLIN | POLLERR | POLLHUP))) {
      ssize_t k = ::recv(recv_fd, rp + got, rn - got, 0);
      if (k > 0) {
        got += static_cast<size_t>(k);
      } else if (k == 0) {
        return unavailable("rank " + std::to_string(from) + " closed its connection with " + std::to_string(rn - got) +
                           " of " + std::to_string(rn) + " bytes unsent (tcp)");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return unavailable("connection to rank " + std::to_string(from) + " failed: " + errno_text() + " (tcp)");
      }
    }
  }
  return {};
}

class TcpTransport final : public Transport {
 public:
  TcpTransport(int rank, std::vector<int> fds) : rank_(rank), fds_(std::move(fds)) {}
  ~TcpTransport() override {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(fds_.size()); }
  std::string kind() const override { return "tcp"; }

  Status send(int to, const void* data, size_t bytes, Clock::time_point deadline) override {
    return send_recv(to, data, bytes, to, nullptr, 0, deadline);
  }
  Status recv(int from, void* data, size_t bytes, Clock::time_point deadline) override {
    return send_recv(from, nullptr, 0, from, data, bytes, deadline);
  }
  Status send_recv(int to, const void* send_data, size_t send_bytes, int from, void* recv_data, size_t recv_bytes,
                   Clock::time_point deadline) override {
    if (!failed_.ok()) return failed_;
    for (int peer : {to, from})
      if (peer < 0 || peer >= size() || peer == rank_)
        return invalid_argument("peer rank " + std::to_string(peer) + " is not another rank of a group of " +
                                std::to_string(size()));
    Status st = pump(fds_[to], static_cast<const char*>(send_data), send_bytes, to, fds_[from],
                     static_cast<char*>(recv_data), recv_bytes, from, deadline);
    if (!st.ok()) failed_ = st;
    return st;
  }

 private:
  int rank_;
  std::vector<int> fds_;  // fds_[peer]; -1 for this rank
  Status failed_;
};

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
  if (rank < 0 || rank >= size)
    return invalid_argument("rank " + std::to_string(rank) + " is not in a group of " + std::to_string(size));
  const Clock::time_point deadline = Clock::now() + options.timeout;
  std::vector<int> fds(size, -1);
  auto give_up = [&fds](Status st) {
    for (int& fd : fds)
      if (fd >= 0) ::close(fd);
    return st;
  };
  // Dial every lower rank and introduce ourselves: {magic, rank, size}.
  for (int peer = 0; peer < rank; ++peer) {
    auto fd = dial(addresses[peer], peer, deadline);
    if (!fd) return give_up(fd.status().with_context("rank " + std::to_string(rank) + " forming a tcp group"));
    fds[peer] = *fd;
    uint32_t hello[3] = {kMagic, static_cast<uint32_t>(rank), static_cast<uint32_t>(size)};
    Status st = pump(*fd, reinterpret_cast<const char*>(hello), sizeof hello, peer, *fd, nullptr, 0, peer, deadline);
    if (!st.ok()) return give_up(st.with_context("rank " + std::to_string(rank) + " forming a tcp group"));
  }
  // Accept every higher rank; each says who it is.
  for (int accepted = 0; accepted < size - 1 - rank;) {
    pollfd p{listener.fd(), POLLIN, 0};
    if (::poll(&p, 1, ms_left(deadline)) <= 0) {
      std::string missing;
      for (int peer = rank + 1; peer < size; ++peer)
        if (fds[peer] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
      return give_up(Status(Code::timeout, "rank " + std::to_string(rank) + " forming a tcp group: rank(s) " + missing +
                                               " did not connect before the deadline"));
    }
    int fd = ::accept(listener.fd(), nullptr, nullptr);
    if (fd < 0) continue;
    tune(fd);
    uint32_t hello[3] = {0, 0, 0};
    Status st = pump(fd, nullptr, 0, -1, fd, reinterpret_cast<char*>(hello), sizeof hello, -1, deadline);
    const int peer = static_cast<int>(hello[1]);
    if (!st.ok() || hello[0] != kMagic || static_cast<int>(hello[2]) != size || peer <= rank || peer >= size ||
        fds[peer] >= 0) {
      ::close(fd);  // not one of ours, or a duplicate: ignore it and keep waiting
      continue;
    }
    fds[peer] = fd;
    ++accepted;
  }
  return std::unique_ptr<Transport>(std::make_unique<TcpTransport>(rank, std::move(fds)));
}

}  // namespace troupe::collectives
