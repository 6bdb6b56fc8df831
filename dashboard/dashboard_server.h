// The head's web dashboard: an HTTP server (cpp-httplib) on the head's bind address serving
//
//   GET /             the status page (page.h: HTML, CSS and JS embedded, nothing from the network)
//   GET /api/...      the JSON API (api.h; docs/dashboard.md)
//   GET /api/stream   the live stream (live_stream.h), at most `max_streams` at once (then 503)
//
// Bound to a loopback address it serves everyone on this machine; bound elsewhere every request
// must carry the cluster token, else 401 (auth.h). Requests run on a pool of `workers` threads
// plus one per live stream; the server never blocks the caller of start() or the head's loop.
// Only GET is served; bodies are refused beyond 64 KiB, request lines beyond 8 KiB (414).
#pragma once

#include <functional>

#include "tls/tls_files.h"
#include "dashboard/api.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/config.h"
#include "core/status.h"
#include "gcs/store.h"

namespace troupe::dashboard {

struct DashboardOptions {
  std::string bind = "127.0.0.1";
  int port = 0;                          // 0: a free one (port() tells which)
  std::string token;                     // the cluster token
  // by_address: a token is required unless `bind` is a loopback address; always/never: tests.
  enum class Auth { by_address, always, never } auth = Auth::by_address;
  // The GCS; used from several threads at once, so it must be thread-safe (RedisStore and
  // InMemoryStore are). The head gives the dashboard a connection of its own.
  std::shared_ptr<gcs::Store> store;
  std::chrono::milliseconds stream_interval{1000};
  int max_streams = 8;
  int workers = 8;                       // threads for requests other than live streams
  // Where this head's processes log (core/logging.h); /api/logs reads the files of the nodes on
  // this host there. Empty: /api/logs says no log is readable.
  std::string log_dir;
  // How /api/logs reaches the log of a node on another host (ApiContext::remote_tail).
  std::function<Expected<Tail>(const gcs::NodeRecord&, const TailOptions&)> remote_tail;
  // Set: HTTPS with `tls.cert`, clients presenting a certificate of `tls.ca` (mutual TLS).
  tls::TlsFiles tls = {};

  // bind, port (dashboard_port), stream interval and max streams from the settings.
  static DashboardOptions from_config(const Config& config, const std::string& bind, const std::string& token);
};

class DashboardServer {
 public:
  // Listens and starts serving on a thread of its own. Errors: invalid_argument (no store, bad
  // options, a token required but none given), unavailable (the address cannot be bound: naming
  // it and the dashboard_port setting).
  static Expected<std::unique_ptr<DashboardServer>> start(DashboardOptions options);
  ~DashboardServer();
  DashboardServer(const DashboardServer&) = delete;
  DashboardServer& operator=(const DashboardServer&) = delete;

  // Stops listening, ends live streams (within ~100 ms) and waits for the serving threads.
  // Idempotent.
  void stop();

  int port() const;
  // http://<host>:<port> — the bind address, or this machine's hostname when bound to every
  // interface (0.0.0.0, ::).
  std::string url() const;
  bool token_required() const;
  int live_streams() const;  // open /api/stream connections

  struct Impl;

 private:
  explicit DashboardServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::dashboard
