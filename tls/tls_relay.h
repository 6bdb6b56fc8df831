// TLS under a connected socket, for code written against plain sockets (the collectives' TCP mesh,
// the parameter servers' wire, hiredis): wrap() performs the handshake on the TCP socket — both
// ends authenticated by the cluster's CA (tls_context.h) — and returns the local end of a socket
// pair whose bytes are the connection's plaintext. A relay thread per connection moves bytes
// between the pair and the TLS stream until either side closes: closing the returned socket
// closes the connection (close_notify, then the TCP socket); the peer closing or the connection
// failing closes the returned socket (its reader sees end-of-stream), so dead-peer detection
// works unchanged. Socket options of the TCP socket (keepalive, user timeout) keep working on it.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "core/status.h"
#include "tls/tls_context.h"

namespace troupe::tls {

enum class Role { client, server };

// `fd`: a connected TCP socket (blocking or not), owned by the relay from now on, also on failure
// (closed). Returns an AF_UNIX stream socket with `fd`'s O_NONBLOCK flag. Errors name `peer` and
// what the handshake said: a certificate not signed by the cluster's CA (ours refused by the peer,
// or the peer's refused here: invalid_argument, as a retry cannot help), a peer speaking plain TCP
// (unavailable), the deadline (timeout).
Expected<int> wrap(int fd, const TlsContext& context, Role role, std::chrono::milliseconds timeout,
                   const std::string& peer);

// As wrap(), but the plaintext goes to and from the socket `open_plain` returns (a connected stream
// socket, owned by the relay), called only once the handshake succeeded — an unauthenticated peer
// never reaches what it connects to — instead of a new socket pair.
Status wrap_into(int fd, const std::function<Expected<int>()>& open_plain, const TlsContext& context, Role role,
                 std::chrono::milliseconds timeout, const std::string& peer);

// Connects to host:port and completes a TLS handshake, then closes: whether this process and the
// peer accept each other's certificates, with wrap()'s clear error when not (invalid_argument when a
// certificate was refused, unavailable when nothing answers). For a check before a library (CAF)
// makes the real connection and would only report it failed.
Status probe(const std::string& host, int port, const TlsContext& context, std::chrono::milliseconds timeout);

}  // namespace troupe::tls
