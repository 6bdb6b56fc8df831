// The embedded redis-server of a troupe session: writes a redis.conf into the session directory,
// starts redis-server as a child process (its own process group) and waits until it answers PING
// with the password; stops it with SIGTERM, then SIGKILL after a deadline.
//
// Data lives in the session directory with the append-only file on, fsynced before each write is
// answered (appendfsync always: the shard ledger, trained ranges, checkpoint manifests and applied
// data that exactly-once accounting relies on must survive a kill -9 of the server or a crash of
// the host, which `everysec` would lose up to a second of). A server restarted on the same
// directory (start() again with the same port and password, or restart(), or the head's watchdog:
// gcs/redis_watchdog.h) finds every record it acknowledged.
//
// Two ways to run it:
//   * attached (default): the RedisServer object owns the child; its destructor stops it, and the
//     child gets SIGTERM if the thread that started it dies (PR_SET_PDEATHSIG) — start it from a
//     thread that lives as long as the server should.
//   * detached (`detach = true`, for `troupe up`): the server is started in its own session via a
//     double fork, so it outlives this process; its pid goes to <session_dir>/redis.pid and
//     stop_pid() stops it later from any process.
//
// Layout of the session directory: redis.conf (mode 0600: it holds the password), redis.log
// (the server's log, also its stdout/stderr), appendonlydir/ (the data), redis.pid (detached).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "core/status.h"
#include "tls/tls_files.h"
#include "gcs/redis_client.h"

namespace troupe::gcs {

struct RedisServerOptions {
  std::string session_dir;            // required; created if missing
  int port = 0;                       // 0: pick a free loopback port
  std::string password;               // empty: 32 random hex characters
  std::string bind = "127.0.0.1";
  std::string redis_server;           // path of redis-server; empty: search PATH
  std::chrono::milliseconds start_timeout{10000};  // until it answers PING
  std::chrono::milliseconds stop_timeout{5000};    // after SIGTERM, before SIGKILL
  bool detach = false;
  // Set: the server listens for TLS only (tls-port = port, no plain port) and accepts only clients
  // presenting a certificate of the cluster's CA (tls-auth-clients yes), with `tls.cert` as its own.
  tls::TlsFiles tls = {};
};

class RedisServer {
 public:
  // Starts the server and waits until it answers. Errors: invalid_argument (no session dir,
  // redis-server not found), io_error (cannot write the config), unavailable (the server exited or
  // did not answer in time: the message names the port and the log file and quotes the log's last
  // lines, e.g. "Address already in use"). On error no process is left running.
  static Expected<std::unique_ptr<RedisServer>> start(const RedisServerOptions& options);
  // Stops an attached server; leaves a detached one running.
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // SIGTERM, then SIGKILL after stop_timeout; reaps the child. Stopping a stopped server is ok.
  Status stop();
  // stop(), then start again on the same port, password and directory.
  Status restart();

  const std::string& host() const { return host_; }
  int port() const { return options_.port; }
  const std::string& password() const { return options_.password; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  bool detached() const { return options_.detach; }
  std::string conf_file() const { return options_.session_dir + "/redis.conf"; }
  std::string log_file() const { return options_.session_dir + "/redis.log"; }
  std::string pid_file() const { return options_.session_dir + "/redis.pid"; }
  // Options for a client of this server (host, port, password; default timeouts).
  RedisOptions client_options() const;

 private:
  explicit RedisServer(RedisServerOptions options) : options_(std::move(options)) {}
  Status launch();          // writes the config, spawns, waits until ready
  Status wait_ready();
  Status write_config() const;

  RedisServerOptions options_;
  std::string host_;
  std::string binary_;
  pid_t pid_ = -1;
};

// Stops the detached server whose pid is in `pid_file` (SIGTERM, then SIGKILL after `timeout`)
// and removes the file. ok when the process is already gone (or the pid now belongs to a process
// that is not redis-server); not_found when there is no pid file.
Status stop_pid(const std::string& pid_file, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close).
Expected<int> pick_free_port();

}  // namespace troupe::gcs
