// TCP transport: a full mesh of connections between the ranks of a group, anywhere on a network.
// Each rank listens on its own address, connects to every lower rank and accepts every higher one;
// the handshake carries the connecting rank, the group name and generation, and a rank of another
// group or generation is refused with an error naming both (tcp_mesh.cc). Sockets are nonblocking
// with TCP_NODELAY and every wait is a poll() bounded by the deadline, so send_recv moves both
// directions at once.
//
// Every message is a frame stamped with the call's CallDescriptor (tcp_wire.h): a rank that called
// another collective, count or dtype is invalid_argument naming it and both calls. abort() sends an
// abort frame to every peer; a rank that receives one fails its call with that error (naming the
// rank at the root of it) and passes it on, so every member learns of a failure well before its
// deadline. A closed connection is `unavailable` naming the peer rank; a failed transport stays
// failed.
//
//   auto listener = TcpListener::open("127.0.0.1");           // port 0: the kernel picks one
//   publish(rank, "127.0.0.1:" + std::to_string(listener->port()));
//   auto transport = connect_tcp_group(rank, std::move(*listener), all_addresses, {});
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/transport.h"
#include "tls/tls_context.h"

namespace troupe::collectives {

// A listening socket, opened before the group connects so its port can be published first.
class TcpListener {
 public:
  // Listens on host:port (IPv4 address or name); port 0 lets the kernel pick a free port.
  static Expected<TcpListener> open(const std::string& host, int port = 0);
  TcpListener(TcpListener&& other) noexcept;
  TcpListener& operator=(TcpListener&& other) noexcept;
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;
  ~TcpListener();

  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  TcpListener(int fd, int port) : fd_(fd), port_(port) {}
  int fd_ = -1;
  int port_ = 0;
};

struct TcpGroupOptions {
  std::chrono::milliseconds timeout{30000};  // for the whole mesh to form
  // Who may join: a connecting rank must name the same group and generation, else it is refused.
  std::string group;
  int64_t generation = 0;
  // Set: every connection of the mesh is TLS (tls/tls_relay.h), both ends authenticated by the
  // cluster's CA; the ranks' handshake then runs inside it.
  std::shared_ptr<const tls::TlsContext> tls = nullptr;
};

// Forms the mesh for `rank`; addresses[r] is "host:port" of rank r (this rank's is not dialled).
// Fails with `timeout` listing the ranks that did not connect in time.
Expected<std::unique_ptr<Transport>> connect_tcp_group(int rank, TcpListener listener,
                                                      const std::vector<std::string>& addresses,
                                                      const TcpGroupOptions& options = {});

}  // namespace troupe::collectives
