#include "tls/tls_relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

namespace troupe::tls {
namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(left);
}

void set_nonblocking(int fd, bool on) {
  const int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

// What a failed handshake means to the person reading the error: invalid_argument when a certificate
// was refused (either side's: retrying cannot help), unavailable otherwise.
Status handshake_failure(SSL* ssl, const TlsContext& context, const std::string& peer, const std::string& errors) {
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    return invalid_argument("TLS handshake with " + peer + ": its certificate was refused here (" +
           X509_verify_cert_error_string(verify) + "): it is not signed by the cluster CA this process trusts (" +
           context.files().ca + ") — the two do not hold certificates of the same cluster");
  }
  if (errors.find("alert unknown ca") != std::string::npos || errors.find("alert bad certificate") != std::string::npos ||
      errors.find("alert certificate required") != std::string::npos ||
      errors.find("alert decrypt error") != std::string::npos) {
    return invalid_argument("TLS handshake with " + peer + ": it refused this process's certificate (" + errors +
                            "): this process's certificate must be signed by the cluster's CA (`troupe tls issue` on "
                            "the head's host makes one)");
  }
  if (errors.find("wrong version number") != std::string::npos || errors.find("packet length too long") != std::string::npos ||
      errors.find("http request") != std::string::npos) {
    return unavailable("TLS handshake with " + peer + ": it does not speak TLS (" + errors +
                       ") — is it a cluster started without --tls?");
  }
  return unavailable("TLS handshake with " + peer + " failed: " + (errors.empty() ? "the connection closed" : errors));
}

// Moves bytes both ways until one side ends; owns `ssl` (and its socket) and `local`.
void relay(SSL* ssl, int net, int local) {
  set_nonblocking(net, true);
  set_nonblocking(local, true);
  // Big buffers and as many records per pass as are ready: one poll and one send per pass, not per
  // 16 KiB record (the difference is 3x in busbw on 2 cores).
  constexpr size_t kBuffer = 1 << 18;
  std::vector<char> up(kBuffer), down(kBuffer);  // up: local -> TLS; down: TLS -> local
  size_t up_len = 0, up_off = 0, down_len = 0, down_off = 0;
  bool local_eof = false, net_eof = false, failed = false;
  bool read_wants_write = false, write_wants_read = false;
  while (!failed) {
    // TLS -> local
    while (!net_eof && down_off == 0 && down_len < down.size()) {
      const int n = SSL_read(ssl, down.data() + down_len, static_cast<int>(down.size() - down_len));
      if (n > 0) {
        down_len += static_cast<size_t>(n);
        read_wants_write = false;
        continue;
      }
      const int e = SSL_get_error(ssl, n);
      read_wants_write = e == SSL_ERROR_WANT_WRITE;
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) break;
      net_eof = true;  // close_notify, reset or failure: the peer is gone
      if (e != SSL_ERROR_ZERO_RETURN) failed = true;
    }
    while (down_off < down_len) {
      const ssize_t k = ::send(local, down.data() + down_off, down_len - down_off, MSG_NOSIGNAL);
      if (k > 0) {
        down_off += static_cast<size_t>(k);
      } else {
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) break;
        failed = true;  // the local side closed
        break;
      }
    }
    if (down_off == down_len) down_len = down_off = 0;
    // local -> TLS
    if (!local_eof && up_len == 0) {
      const ssize_t k = ::recv(local, up.data(), up.size(), 0);
      if (k > 0) {
        up_len = static_cast<size_t>(k);
        up_off = 0;
      } else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
        local_eof = true;
      }
    }
    while (up_off < up_len) {
      const int n = SSL_write(ssl, up.data() + up_off, static_cast<int>(up_len - up_off));
      if (n > 0) {
        up_off += static_cast<size_t>(n);
        write_wants_read = false;
        continue;
      }
      const int e = SSL_get_error(ssl, n);
      write_wants_read = e == SSL_ERROR_WANT_READ;
      if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) failed = true;
      break;
    }
    if (up_off == up_len) up_len = up_off = 0;
    if ((local_eof && up_len == 0) || (net_eof && down_len == 0)) break;
    // Records already read from the socket (read-ahead) do not wake poll: take them first.
    if (SSL_has_pending(ssl) && down_len < down.size() && down_off == 0) continue;
    pollfd fds[2] = {{net, 0, 0}, {local, 0, 0}};
    if ((!net_eof && down_off == 0 && down_len < down.size() && !read_wants_write) || write_wants_read)
      fds[0].events |= POLLIN;
    if (up_len > 0 || read_wants_write) fds[0].events |= POLLOUT;
    if (!local_eof && up_len == 0) fds[1].events |= POLLIN;
    if (down_len > 0) fds[1].events |= POLLOUT;
    if (::poll(fds, 2, 1000) < 0 && errno != EINTR) break;
    if ((fds[1].revents & (POLLERR | POLLNVAL)) || (fds[0].revents & POLLNVAL)) break;
  }
  if (!failed && local_eof) {
    set_nonblocking(net, false);
    SSL_shutdown(ssl);  // close_notify: the peer reads end-of-stream
  }
  ::close(local);
  SSL_free(ssl);
  ::close(net);
}

// The handshake on `fd` within `timeout`; the session, or the error (fd closed then).
Expected<SSL*> handshake(int fd, const TlsContext& context, Role role, std::chrono::milliseconds timeout,
                         const std::string& peer) {
  SSL* ssl = SSL_new(role == Role::client ? context.client() : context.server());
  if (!ssl) {
    ::close(fd);
    return internal_error("TLS: cannot make a session for " + peer + ": " + openssl_errors());
  }
  SSL_set_fd(ssl, fd);
  set_nonblocking(fd, true);
  const auto deadline = Clock::now() + timeout;
  ERR_clear_error();
  for (;;) {
    const int rc = role == Role::client ? SSL_connect(ssl) : SSL_accept(ssl);
    if (rc == 1) return ssl;
    const int e = SSL_get_error(ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      pollfd p{fd, static_cast<short>(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
      if (::poll(&p, 1, ms_left(deadline)) > 0 || Clock::now() < deadline) continue;
      SSL_free(ssl);
      ::close(fd);
      return Status(Code::timeout, "TLS handshake with " + peer + " did not finish within " +
                                       std::to_string(timeout.count()) + " ms");
    }
    const std::string errors = openssl_errors();
    Status st = handshake_failure(ssl, context, peer, errors);
    SSL_free(ssl);
    ::close(fd);
    return st;
  }
}

}  // namespace

Expected<int> wrap(int fd, const TlsContext& context, Role role, std::chrono::milliseconds timeout,
                   const std::string& peer) {
  const bool was_nonblocking = (fcntl(fd, F_GETFL, 0) & O_NONBLOCK) != 0;
  auto ssl = handshake(fd, context, role, timeout, peer);
  if (!ssl.ok()) return ssl.status();
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    const std::string why = std::strerror(errno);
    SSL_free(*ssl);
    ::close(fd);
    return io_error("TLS: socketpair: " + why);
  }
  set_nonblocking(pair[0], was_nonblocking);
  std::thread(relay, *ssl, fd, pair[1]).detach();
  return pair[0];
}

Status wrap_into(int fd, const std::function<Expected<int>()>& open_plain, const TlsContext& context, Role role,
                 std::chrono::milliseconds timeout, const std::string& peer) {
  auto ssl = handshake(fd, context, role, timeout, peer);
  if (!ssl.ok()) return ssl.status();
  auto plain = open_plain();
  if (!plain.ok()) {
    SSL_free(*ssl);
    ::close(fd);
    return plain.status();
  }
  std::thread(relay, *ssl, fd, *plain).detach();
  return {};
}

Status probe(const std::string& host, int port, const TlsContext& context, std::chrono::milliseconds timeout) {
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    return unavailable("cannot resolve " + host);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int rc = fd < 0 ? -1 : ::connect(fd, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  if (rc != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return unavailable("cannot connect to " + where + ": " + why);
  }
  auto plain = wrap(fd, context, Role::client, timeout, where);
  if (!plain.ok()) return plain.status();
  ::close(*plain);
  return {};
}

}  // namespace troupe::tls
