#include "actors/tls_middleman.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <spdlog/spdlog.h>

#include "caf/actor_system.hpp"
#include "caf/io/basp_broker.hpp"
#include "caf/io/middleman.hpp"
#include "caf/io/middleman_actor_impl.hpp"
#include "caf/io/network/default_multiplexer.hpp"
#include "caf/io/network/doorman_impl.hpp"
#include "tls/tls_relay.h"

namespace troupe::actors {
namespace {

using caf::io::network::default_multiplexer;
using caf::io::network::native_socket;
constexpr auto kHandshakeTimeout = std::chrono::seconds(10);

std::string peer_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "a peer";
  char ip[INET_ADDRSTRLEN] = {0};
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

// The public side of a published port: accepts TCP, authenticates with TLS, relays to the Unix
// socket CAF listens on. Stops (and removes the socket's directory) when the doorman closes.
class TlsFront {
 public:
  TlsFront(int listener, std::string dir, std::shared_ptr<const tls::TlsContext> context)
      : listener_(listener), dir_(std::move(dir)), context_(std::move(context)) {
    thread_ = std::thread([this] { run(); });
  }
  ~TlsFront() { stop(); }
  void stop() {
    if (stopping_.exchange(true)) return;
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string socket_path() const { return dir_ + "/caf.sock"; }

 private:
  void run() {
    while (!stopping_.load()) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::thread([fd, path = socket_path(), context = context_] {
        const std::string peer = peer_of(fd);
        // CAF's socket is dialled only for a peer that passed the handshake.
        auto open_plain = [&path]() -> Expected<int> {
          const int plain = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
          sockaddr_un a{};
          a.sun_family = AF_UNIX;
          std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
          if (plain < 0 || ::connect(plain, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            const std::string why = std::strerror(errno);
            if (plain >= 0) ::close(plain);
            return unavailable("the actor system's socket " + path + ": " + why + " (stopping?)");
          }
          return plain;
        };
        Status st = tls::wrap_into(fd, open_plain, *context, tls::Role::server,
                                   std::chrono::duration_cast<std::chrono::milliseconds>(kHandshakeTimeout), peer);
        if (!st.ok()) spdlog::warn("refused a connection: {}", st.message());
      }).detach();
    }
  }

  int listener_;
  std::string dir_;
  std::shared_ptr<const tls::TlsContext> context_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// CAF's acceptor on the Unix socket, reporting the public TLS port as its own (BASP finds the
// published actor by it).
class TlsDoorman : public caf::io::network::doorman_impl {
 public:
  TlsDoorman(default_multiplexer& mx, native_socket fd, uint16_t port, std::string addr, std::shared_ptr<TlsFront> front)
      : doorman_impl(mx, fd), port_(port), addr_(std::move(addr)), front_(std::move(front)) {}
  uint16_t port() const override { return port_; }
  std::string addr() const override { return addr_; }
  void graceful_shutdown() override {
    front_->stop();
    doorman_impl::graceful_shutdown();
  }

 private:
  uint16_t port_;
  std::string addr_;
  std::shared_ptr<TlsFront> front_;
};

class TlsMiddlemanActor : public caf::io::middleman_actor_impl {
 public:
  TlsMiddlemanActor(caf::actor_config& cfg, caf::actor broker, std::shared_ptr<const tls::TlsContext> context)
      : middleman_actor_impl(cfg, std::move(broker)), context_(std::move(context)) {}

  const char* name() const override { return "troupe.tls_middleman"; }

 protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host, uint16_t port) override {
    const std::string where = host + ":" + std::to_string(port);
    auto fd = caf::io::network::new_tcp_connection(host, port);
    if (!fd) return std::move(fd.error());
    auto plain = tls::wrap(*fd, *context_, tls::Role::client,
                           std::chrono::duration_cast<std::chrono::milliseconds>(kHandshakeTimeout), where);
    if (!plain.ok()) return caf::make_error(caf::sec::cannot_connect_to_node, plain.status().message());
    caf::io::network::nonblocking(*plain, true);
    return mpx().new_scribe(*plain);
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr, bool reuse) override {
    auto listener = caf::io::network::new_tcp_acceptor_impl(port, addr, reuse);
    if (!listener) return std::move(listener.error());
    auto bound = caf::io::network::local_port_of_fd(*listener);
    if (!bound) {
      ::close(*listener);
      return std::move(bound.error());
    }
    char dir[] = "/tmp/troupe-caf-XXXXXX";  // mkdtemp: mode 0700, so only this user reaches the socket
    if (!::mkdtemp(dir)) {
      ::close(*listener);
      return caf::make_error(caf::sec::cannot_open_port, std::string("mkdtemp: ") + std::strerror(errno));
    }
    auto front = std::make_shared<TlsFront>(*listener, dir, context_);
    const int unix_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, front->socket_path().c_str(), sizeof a.sun_path - 1);
    if (unix_fd < 0 || ::bind(unix_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(unix_fd, 128) != 0) {
      const std::string why = std::strerror(errno);
      if (unix_fd >= 0) ::close(unix_fd);
      front->stop();
      return caf::make_error(caf::sec::cannot_open_port, "unix socket " + front->socket_path() + ": " + why);
    }
    caf::io::network::nonblocking(unix_fd, true);
    return caf::make_counted<TlsDoorman>(mpx(), unix_fd, *bound, addr ? addr : "", std::move(front));
  }

 private:
  default_multiplexer& mpx() { return static_cast<default_multiplexer&>(system().middleman().backend()); }
  std::shared_ptr<const tls::TlsContext> context_;
};

}  // namespace

caf::io::middleman_actor spawn_tls_middleman(caf::actor_system& sys, std::shared_ptr<const tls::TlsContext> context) {
  auto broker = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  return sys.spawn<TlsMiddlemanActor, caf::detached + caf::hidden>(std::move(broker), std::move(context));
}

}  // namespace troupe::actors
