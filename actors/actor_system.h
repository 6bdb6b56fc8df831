// One CAF actor system per troupe process, with the middleman (CAF's network layer) loaded and
// troupe's message types announced. It is the I/O edge between troupe and CAF: publishing an actor
// on a TCP port and connecting to a published actor on another node both return Status/Expected
// with messages that say what failed, where, and what to do; connecting never blocks past its
// deadline.
//
// Usage (a node process):
//
//   ActorSystemOptions opts;                       // sharing scheduler, 127.0.0.1, port 0 = pick
//   auto sys = ActorSystem::start(opts);           // Expected<std::unique_ptr<ActorSystem>>
//   caf::actor nm = spawn_node_manager((*sys)->system(), nm_options);
//   auto port = (*sys)->publish(nm);               // Expected<uint16_t>, the port actually bound
//
// and the head:
//
//   auto nm = head->connect("127.0.0.1", port, std::chrono::seconds(2));   // Expected<caf::actor>
//
// Shutdown: the destructor sends user_shutdown to every actor published or track()ed here, then
// waits (CAF semantics) until all non-hidden actors of the system are done. Actors you spawn
// yourself and neither track() nor stop keep the destructor waiting.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "caf/fwd.hpp"
#include "core/status.h"
#include "tls/tls_files.h"

namespace troupe::actors {

struct ActorSystemOptions {
  // CAF scheduler: "sharing" (one shared queue, idle workers wait on a condition variable) or
  // "stealing" (per-worker queues; idle workers poll and sleep 50 us - 10 ms between polls).
  // Sharing is the default: on a 2-core host a remote round trip took ~130 us with it and
  // ~450 us with stealing (bench_actors); batched messages run over 1M items/s with either.
  std::string scheduler_policy = "sharing";
  // Scheduler worker threads; 0 = CAF's default (the number of hardware threads).
  size_t worker_threads = 0;
  // Address publish() binds to; "0.0.0.0" for every interface.
  std::string bind_address = "127.0.0.1";
  // Port publish() binds to when called without one; 0 lets the OS pick.
  uint16_t port = 0;
  // Default deadline of connect().
  std::chrono::milliseconds connect_timeout{2000};
  // The cluster's TLS files (empty: those of the environment, TROUPE_TLS_*, if any): when set, every
  // connection (publish and connect) is TLS through CAF's OpenSSL module, both ends presenting a
  // certificate of the cluster's CA.
  tls::TlsFiles tls = {};

  // invalid_argument naming the field when a value is out of range.
  Status validate() const;
};

class ActorSystem {
 public:
  // Builds the config (policy, threads, middleman, troupe message types) and starts the system.
  // Fails with invalid_argument for bad options, internal if CAF refuses to start.
  static Expected<std::unique_ptr<ActorSystem>> start(const ActorSystemOptions& options);

  ~ActorSystem();
  ActorSystem(const ActorSystem&) = delete;
  ActorSystem& operator=(const ActorSystem&) = delete;

  caf::actor_system& system();
  const ActorSystemOptions& options() const;

  // Publishes `whom` on options().bind_address at `port` (options().port when absent; 0 = pick)
  // and returns the port actually bound. io_error naming address and port when binding fails
  // (port in use, address not local). The actor is track()ed.
  Expected<uint16_t> publish(const caf::actor& whom);
  Expected<uint16_t> publish(const caf::actor& whom, uint16_t port);

  // Connects to the actor published at host:port and returns a handle to it. Gives up after
  // `timeout` (options().connect_timeout when absent): unavailable when the node refuses or cannot
  // be reached, timeout when it does not answer in time, not_found when the port has no actor
  // published. Never blocks the caller longer than the timeout (plus scheduling noise).
  Expected<caf::actor> connect(const std::string& host, uint16_t port);
  Expected<caf::actor> connect(const std::string& host, uint16_t port,
                               std::chrono::milliseconds timeout);

  // Registers `whom` to receive user_shutdown when this system shuts down.
  void track(const caf::actor& whom);

 private:
  struct Impl;
  explicit ActorSystem(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Splits "host:port" (as in gcs::NodeRecord::address). invalid_argument naming the text when the
// colon or a port in 1..65535 is missing.
Expected<std::pair<std::string, uint16_t>> parse_host_port(const std::string& address);

// A caf::error in words for messages: its string context when it carries one ("unknown method
// 'x'"), CAF's rendering otherwise.
std::string describe(const caf::actor_system& sys, const caf::error& err);

// `status` as a caf::error of troupe's category (atom "troupe"): how actors answer a request
// they refuse. The code and message survive the trip to another node.
caf::error to_error(const Status& status);

// `err` as a Status with the message "<what>: <describe(err)>". Errors of troupe's category keep
// their code; CAF's become timeout (request timeouts), unavailable (lost or unreachable peers) or
// internal.
Status to_status(const caf::actor_system& sys, const caf::error& err, const std::string& what);

// "2 s", "0.5 s", "250 ms": a deadline in the words error messages use.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace troupe::actors
