// CAF's connections under the cluster's TLS. Not CAF's own OpenSSL module: in CAF 0.17.6 (Debian 12)
// one of its connections closing — a node going away, or the redundant second connection CAF
// closes when two processes dial each other — stalls the process's other TLS connections (requests
// over them time out; reproduced with two actor systems on loopback), and troupe does both all the
// time. Instead, a middleman actor of CAF's own interface whose connections carry TLS through the
// relay of tls/tls_relay.h:
//   publish: the public port is a TLS listener of ours; each connection it accepts is authenticated
//            (a certificate of the cluster's CA) and relayed to a Unix socket in a private directory
//            (mode 0700) that CAF accepts on — no plain port anywhere;
//   connect: a TCP connection, the TLS handshake (our certificate, theirs checked), then CAF reads
//            and writes the plaintext end of the relay's socket pair.
// A refused handshake reaches the caller as cannot_connect_to_node with the relay's message.
#pragma once

#include <memory>

#include "caf/fwd.hpp"
#include "caf/io/middleman_actor.hpp"
#include "tls/tls_context.h"

namespace troupe::actors {

caf::io::middleman_actor spawn_tls_middleman(caf::actor_system& sys, std::shared_ptr<const tls::TlsContext> context);

}  // namespace troupe::actors
