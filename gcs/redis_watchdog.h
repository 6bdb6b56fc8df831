// The head's watch over the embedded redis-server that `troupe up` started (issue 27): a dead or
// hung server is started again on the same port, password and data directory, so the cluster's GCS
// comes back by itself instead of waiting for a person.
//
//   every `interval`: PING (its own connection, short deadlines)
//     answered                          -> healthy
//     not answered, the process is gone -> restart at once (kill -9, OOM killer, crash)
//     not answered for `hung_after`     -> hung: SIGKILL it, restart
//   restart: RedisServer::start (detached) from the same redis.conf settings; the append-only
//   file in the data directory brings every record back (the embedded server fsyncs each write:
//   gcs/redis_server.h); the new pid goes to every pid file; `on_restart` is told (the head records
//   the event "gcs_restarted"). A restart that fails is tried again at the next interval.
//
// The watchdog owns one thread; its destructor stops it within one interval.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gcs/redis_server.h"

namespace troupe::gcs {

struct RedisWatchdogOptions {
  RedisServerOptions server;                      // session_dir, port, password, bind (detach is set)
  std::vector<std::string> pid_files;             // the server's pid, written again after a restart
  std::chrono::milliseconds interval{200};        // between PINGs
  std::chrono::milliseconds ping_timeout{500};    // one PING's connect and answer
  std::chrono::milliseconds hung_after{5000};     // unanswered this long while the process lives: hung
  // After a restart, once the new server answers: what happened, in one line.
  std::function<void(const std::string& what)> on_restart;
};

class RedisWatchdog {
 public:
  // Starts watching. invalid_argument without a session dir, a port or a pid file.
  static Expected<std::unique_ptr<RedisWatchdog>> start(RedisWatchdogOptions options);
  ~RedisWatchdog();
  RedisWatchdog(const RedisWatchdog&) = delete;
  RedisWatchdog& operator=(const RedisWatchdog&) = delete;

  int restarts() const { return restarts_.load(); }

 private:
  explicit RedisWatchdog(RedisWatchdogOptions options) : options_(std::move(options)) {}
  void run();
  bool ping();
  // Kills what is left of the server (pid, when alive) and starts a new one; "" or why it failed.
  std::string restart(pid_t old, const std::string& why);

  RedisWatchdogOptions options_;
  std::unique_ptr<RedisClient> client_;
  std::atomic<int> restarts_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace troupe::gcs
