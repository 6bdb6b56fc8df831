#include "gcs/redis_watchdog.h"

#include <signal.h>

#include <spdlog/spdlog.h>

#include "core/process.h"

namespace troupe::gcs {
namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
}  // namespace

Expected<std::unique_ptr<RedisWatchdog>> RedisWatchdog::start(RedisWatchdogOptions options) {
  if (options.server.session_dir.empty() || options.server.port <= 0 || options.pid_files.empty())
    return invalid_argument("watching the embedded redis-server needs its data directory, port and pid file");
  options.server.detach = true;  // it must outlive the head, as the one `troupe up` started does
  std::unique_ptr<RedisWatchdog> w(new RedisWatchdog(std::move(options)));
  w->thread_ = std::thread([p = w.get()] { p->run(); });
  return w;
}

RedisWatchdog::~RedisWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool RedisWatchdog::ping() {
  if (!client_) {
    RedisOptions ro;
    ro.host = options_.server.bind;
    ro.port = options_.server.port;
    ro.password = options_.server.password;
    ro.connect_timeout = options_.ping_timeout;
    ro.command_timeout = options_.ping_timeout;
    ro.reconnect_attempts = 1;
    ro.reconnect_deadline = options_.ping_timeout;
    auto c = RedisClient::connect(ro);
    if (!c.ok()) return false;
    client_ = std::move(*c);
  }
  auto r = client_->command({"PING"});
  if (!r.ok()) client_.reset();  // out of step, or the server is gone: dial again next time
  return r.ok();
}

std::string RedisWatchdog::restart(pid_t old, const std::string& why) {
  client_.reset();
  if (old > 0 && process_alive(old)) {
    ::kill(old, SIGKILL);  // hung (or stopped): it cannot be asked to leave
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (process_alive(old) && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto server = RedisServer::start(options_.server);
  if (!server.ok()) return server.status().message();
  for (const std::string& f : options_.pid_files) {
    Status st = write_pid_file(f, (*server)->pid());
    if (!st.ok()) spdlog::warn("gcs watchdog: {}", st.to_string());
  }
  const int n = ++restarts_;
  const std::string what = "the GCS's redis-server on port " + std::to_string(options_.server.port) + " " + why +
                           "; the head started it again (pid " + std::to_string((*server)->pid()) + ", restart " +
                           std::to_string(n) + ") from its append-only file in " + options_.server.session_dir;
  spdlog::warn("gcs watchdog: {}", what);
  if (options_.on_restart) options_.on_restart(what);
  return "";
}

void RedisWatchdog::run() {
  auto last_answer = Clock::now();
  std::string failing;  // the last restart's failure, logged once per change
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (wake_.wait_for(lock, options_.interval, [this] { return stopping_; })) return;
    }
    if (ping()) {
      last_answer = Clock::now();
      continue;
    }
    pid_t pid = 0;
    if (auto p = read_pid_file(options_.pid_files.front()); p.ok()) pid = *p;
    const bool alive = pid > 0 && process_alive(pid);
    std::string why;
    if (!alive) {
      why = pid > 0 ? "(pid " + std::to_string(pid) + ") died" : "is not running (no pid recorded)";
    } else if (Clock::now() - last_answer >= options_.hung_after) {
      why = "(pid " + std::to_string(pid) + ") did not answer PING for " + fmt::format("{:.1f}", seconds_since(last_answer)) +
            " s (hung or stopped; killed)";
    } else {
      continue;  // slow, not yet hung
    }
    const std::string failed = restart(alive ? pid : 0, why);
    if (failed.empty()) {
      last_answer = Clock::now();
      failing.clear();
    } else if (failed != failing) {
      spdlog::error("gcs watchdog: the GCS's redis-server {}, and starting it again failed: {}; trying again every "
                    "{} ms", why, failed, options_.interval.count());
      failing = failed;
    }
  }
}

}  // namespace troupe::gcs
