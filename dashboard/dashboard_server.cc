#include "dashboard/dashboard_server.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include <httplib.h>

#include "core/logging.h"
#include "dashboard/api.h"
#include "dashboard/api_handlers.h"
#include "dashboard/api_params.h"
#include "dashboard/auth.h"
#include "dashboard/prometheus.h"
#include "dashboard/live_stream.h"
#include "dashboard/page.h"

namespace troupe::dashboard {

struct DashboardServer::Impl {
  DashboardOptions options;
  bool token_required = false;
  int port = 0;
  std::unique_ptr<httplib::Server> server;  // an SSLServer with TLS
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::atomic<int> streams{0};
  ApiContext context;  // log_dir and hostname for /api/logs
};

namespace {

using Impl = DashboardServer::Impl;

void send_json(httplib::Response& res, const ApiResponse& r) {
  res.status = r.status;
  res.set_header("Cache-Control", "no-store");
  // Log lines may hold any bytes: invalid UTF-8 is replaced, never thrown about.
  res.set_content(r.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

std::multimap<std::string, std::string> params_of(const httplib::Request& req) {
  return {req.params.begin(), req.params.end()};
}

// Refuses a request without the token when one is required (before any routing).
httplib::Server::HandlerResponse authorize(Impl& s, const httplib::Request& req, httplib::Response& res) {
  if (!s.token_required) return httplib::Server::HandlerResponse::Unhandled;
  const std::string query = req.has_param("token") ? req.get_param_value("token") : "";
  const AuthResult a = check_token(req.get_header_value("Authorization"), query, s.options.token);
  if (a == AuthResult::ok) return httplib::Server::HandlerResponse::Unhandled;
  res.set_header("WWW-Authenticate", "Bearer");
  send_json(res, error_response(401, a == AuthResult::missing
      ? "this dashboard listens on " + s.options.bind + ", not on loopback, so every request needs the cluster "
        "token: header 'Authorization: Bearer <token>' or '?token=<token>' (the token `troupe up` printed; "
        "also in the session's cluster.json)"
      : "wrong cluster token"));
  return httplib::Server::HandlerResponse::Handled;
}

// GET /api/stream: a live stream, unless max_streams are open already.
void serve_stream(Impl& s, const httplib::Request& req, httplib::Response& res) {
  const QueryParams q(params_of(req));
  LiveStreamOptions lo;
  if (auto err = detail::read_view_options(q, &lo.view)) return send_json(res, detail::param_error(*err));
  if (s.streams.fetch_add(1) >= s.options.max_streams) {
    s.streams.fetch_sub(1);
    return send_json(res, error_response(503, std::to_string(s.options.max_streams) +
                                                  " live streams are open already (setting dashboard_max_streams); "
                                                  "close one, or poll /api/cluster"));
  }
  lo.interval = s.options.stream_interval;
  auto stream = std::make_shared<LiveStream>(*s.options.store, lo, s.stopping);
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [stream](size_t, httplib::DataSink& sink) {
        return stream->next([&](const std::string& m) { return sink.write(m.data(), m.size()); },
                            [&] { return sink.is_writable(); });
      },
      [&s](bool) { s.streams.fetch_sub(1); });
}

void add_routes(Impl& s) {
  httplib::Server& http = *s.server;
  http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    return authorize(s, req, res);
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    // Nothing but this page and its own API: no script, style or font from anywhere else.
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                   "img-src 'self' data:");
    res.set_content(dashboard_page(), "text/html; charset=utf-8");
  });
  http.Get("/api/stream", [&s](const httplib::Request& req, httplib::Response& res) { serve_stream(s, req, res); });
  // Prometheus scrapes (dashboard/prometheus.h); the token rule is the API's.
  http.Get("/metrics", [&s](const httplib::Request&, httplib::Response& res) {
    auto text = prometheus_metrics(*s.options.store);
    if (!text.ok()) {
      res.status = 503;
      res.set_content("# the GCS did not answer: " + text.status().to_string() + "\n", "text/plain; charset=utf-8");
      return;
    }
    res.set_header("Cache-Control", "no-store");
    res.set_content(*text, "text/plain; version=0.0.4; charset=utf-8");
  });
  http.Get(R"(/api/.*)", [&s](const httplib::Request& req, httplib::Response& res) {
    send_json(res, handle_api(*s.options.store, {req.path, params_of(req)}, s.context));
  });
  // Unknown paths and methods: a JSON answer instead of an empty body.
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string what = res.status == 404 ? "no such page or endpoint: " + req.method + " " +
                                                     (req.path.size() > 128 ? req.path.substr(0, 128) + "..." : req.path) +
                                                     " (the dashboard serves GET /, GET /api/... and GET /metrics)"
                                               : "HTTP " + std::to_string(res.status);
    send_json(res, error_response(res.status, what));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_json(res, error_response(500, "internal error: " + what));
  });
}

// cpp-httplib writes with send(2) without MSG_NOSIGNAL: a browser that closed a live stream would
// raise SIGPIPE and kill the head. Ignore it (once, and only where nobody installed a handler), as
// gcs/redis_client.cc does: the write then fails and ends that stream alone.
void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  });
}

std::string url_host(const std::string& bind) {
  if (bind == "0.0.0.0" || bind == "::" || bind.empty()) {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0 && name[0]) return name;
    return "localhost";
  }
  return bind.find(':') != std::string::npos ? "[" + bind + "]" : bind;
}

}  // namespace

DashboardOptions DashboardOptions::from_config(const Config& config, const std::string& bind,
                                               const std::string& token) {
  DashboardOptions o;
  o.bind = bind;
  o.port = static_cast<int>(config.dashboard_port);
  o.token = token;
  o.stream_interval = std::chrono::milliseconds(config.dashboard_stream_interval_ms);
  o.max_streams = static_cast<int>(config.dashboard_max_streams);
  // The process's own log file's directory (core/logging.h): the head's session log directory.
  const std::string& log_file = log_file_path();
  if (const size_t slash = log_file.rfind('/'); slash != std::string::npos) o.log_dir = log_file.substr(0, slash);
  return o;
}

Expected<std::unique_ptr<DashboardServer>> DashboardServer::start(DashboardOptions options) {
  if (!options.store) return invalid_argument("dashboard: no GCS store given");
  if (options.port < 0 || options.port > 65535) {
    return invalid_argument("dashboard: port " + std::to_string(options.port) +
                            " is out of range (setting dashboard_port: 0 picks one, -1 turns the dashboard off)");
  }
  if (options.stream_interval.count() < 50 || options.max_streams < 1 || options.workers < 1) {
    return invalid_argument("dashboard: dashboard_stream_interval_ms must be >= 50 and dashboard_max_streams >= 1");
  }
  ignore_sigpipe_once();
  auto impl = std::make_unique<Impl>();
  impl->token_required = options.auth == DashboardOptions::Auth::always ||
                         (options.auth == DashboardOptions::Auth::by_address && !is_loopback_address(options.bind));
  if (impl->token_required && options.token.empty()) {
    return invalid_argument("dashboard: listening on " + options.bind + " needs the cluster token, and none was given");
  }
  impl->context.log_dir = options.log_dir;
  impl->context.remote_tail = options.remote_tail;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0) impl->context.hostname = name;
  impl->options = std::move(options);
  const DashboardOptions& o = impl->options;
  const size_t threads = static_cast<size_t>(o.workers + o.max_streams);
  if (o.tls.enabled()) {
    // HTTPS with the head's certificate; a client must present one of the cluster's CA (mutual
    // TLS, as on every other port of a --tls cluster), and the token rules stay as they are.
    auto https = std::make_unique<httplib::SSLServer>(o.tls.cert.c_str(), o.tls.key.c_str(), o.tls.ca.c_str());
    if (!https->is_valid())
      return invalid_argument("dashboard: cannot serve HTTPS with " + o.tls.cert + " and " + o.tls.key + " (CA " +
                              o.tls.ca + ")");
    impl->server = std::move(https);
  } else {
    impl->server = std::make_unique<httplib::Server>();
  }
  impl->server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl->server->set_keep_alive_timeout(2);
  impl->server->set_read_timeout(5);
  impl->server->set_write_timeout(5);
  impl->server->set_payload_max_length(64 * 1024);
  add_routes(*impl);
  const std::string host = o.bind.size() > 2 && o.bind.front() == '[' ? o.bind.substr(1, o.bind.size() - 2) : o.bind;
  if (o.port == 0) {
    impl->port = impl->server->bind_to_any_port(host);
  } else {
    impl->port = impl->server->bind_to_port(host, o.port) ? o.port : -1;
  }
  if (impl->port <= 0) {
    return unavailable("dashboard: cannot listen on " + o.bind + ":" + std::to_string(o.port) +
                       " (in use, or not an address of this machine); choose another with `--set dashboard_port=N` "
                       "or TROUPE_DASHBOARD_PORT, or turn the dashboard off with -1");
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->server->listen_after_bind(); });
  // stop() only works once the server runs its accept loop: wait for it (it starts at once).
  for (int i = 0; i < 5000 && !impl->server->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return std::unique_ptr<DashboardServer>(new DashboardServer(std::move(impl)));
}

DashboardServer::DashboardServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DashboardServer::~DashboardServer() { stop(); }

void DashboardServer::stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->stopping.store(true);
  impl_->server->stop();
  impl_->thread.join();
}

int DashboardServer::port() const { return impl_->port; }

std::string DashboardServer::url() const {
  return std::string(impl_->options.tls.enabled() ? "https://" : "http://") + url_host(impl_->options.bind) + ":" + std::to_string(impl_->port);
}

bool DashboardServer::token_required() const { return impl_->token_required; }

int DashboardServer::live_streams() const { return impl_->streams.load(); }

}  // namespace troupe::dashboard
