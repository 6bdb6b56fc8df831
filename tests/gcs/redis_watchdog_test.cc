// The head's watchdog over the embedded redis-server (gcs/redis_watchdog.h), with a real detached
// redis-server: killed -9, it is started again on the same port and password with every write it
// acknowledged (appendfsync always); frozen past the hung deadline, it is killed and started again;
// frozen for less, it is left alone. Each restart is told once, saying why.
#include "gcs/redis_watchdog.h"

#include <signal.h>

#include <catch2/catch.hpp>

#include <mutex>
#include <thread>

#include "core/process.h"
#include "gcs/child_process.h"
#include "tests/core/temp_dir.h"

namespace troupe::gcs {

using namespace std::chrono_literals;
using troupe::testing::TempDir;

namespace {

struct Watched {
  TempDir dir;
  std::string pid_file = dir.file("session-redis.pid");
  std::unique_ptr<RedisServer> first;  // detached: outlives this object
  std::mutex mu;
  std::vector<std::string> told;
  std::unique_ptr<RedisWatchdog> watchdog;

  explicit Watched(std::chrono::milliseconds hung_after) {
    RedisServerOptions o;
    o.session_dir = dir.path();
    o.detach = true;
    auto server = RedisServer::start(o);
    INFO(server.status().to_string());
    REQUIRE(server.ok());
    first = std::move(*server);
    REQUIRE(write_pid_file(pid_file, first->pid()).ok());
    RedisWatchdogOptions w;
    w.server = o;
    w.server.port = first->port();
    w.server.password = first->password();
    w.pid_files = {pid_file};
    w.interval = 50ms;
    w.hung_after = hung_after;
    w.on_restart = [this](const std::string& what) {
      std::lock_guard<std::mutex> lock(mu);
      told.push_back(what);
    };
    auto started = RedisWatchdog::start(w);
    REQUIRE(started.ok());
    watchdog = std::move(*started);
  }
  ~Watched() {
    watchdog.reset();  // first: it would start the server again
    (void)stop_pid(pid_file, 2000ms);
    (void)stop_pid(first->pid_file(), 2000ms);
  }
  pid_t current() const {
    auto p = read_pid_file(pid_file);
    return p.ok() ? *p : 0;
  }
  // The pid in the pid file once it is a live process other than `old` (0 after 5 s).
  pid_t replacement_of(pid_t old) const {
    for (int i = 0; i < 100; ++i) {
      const pid_t now = current();
      if (now > 0 && now != old && process_alive(now)) return now;
      std::this_thread::sleep_for(50ms);
    }
    return 0;
  }
  // What the watchdog told, once it told something (the new pid is in the pid file before it
  // tells: wait up to 5 s for the report).
  std::vector<std::string> said() {
    for (int i = 0; i < 100; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!told.empty()) return told;
      }
      std::this_thread::sleep_for(50ms);
    }
    std::lock_guard<std::mutex> lock(mu);
    return told;
  }
};

}  // namespace

TEST_CASE("redis watchdog: a killed server is started again at once, with every acknowledged write",
          "[gcs][redis][watchdog]") {
  Watched w(5000ms);
  auto c = RedisClient::connect(w.first->client_options());
  REQUIRE(c.ok());
  for (int i = 0; i < 200; ++i) REQUIRE((*c)->command({"SET", "k" + std::to_string(i), std::to_string(i)}).ok());
  const pid_t old = w.first->pid();
  REQUIRE(::kill(old, SIGKILL) == 0);  // right after the last write was answered
  const pid_t now = w.replacement_of(old);
  REQUIRE(now > 0);
  auto again = RedisClient::connect(w.first->client_options());  // same port, same password
  REQUIRE(again.ok());
  auto last = (*again)->command({"GET", "k199"});
  REQUIRE(last.ok());
  CHECK(last->str == "199");
  const auto said = w.said();
  CHECK(w.watchdog->restarts() == 1);  // counted before it is told
  REQUIRE(said.size() == 1u);
  CHECK(said[0].find("(pid " + std::to_string(old) + ") died") != std::string::npos);
  CHECK(said[0].find("pid " + std::to_string(now)) != std::string::npos);
}

TEST_CASE("redis watchdog: a server frozen past the hung deadline is killed and started again, a shorter freeze "
          "is waited out", "[gcs][redis][watchdog]") {
  Watched w(1000ms);
  const pid_t old = w.first->pid();
  REQUIRE(::kill(old, SIGSTOP) == 0);
  std::this_thread::sleep_for(400ms);
  REQUIRE(::kill(old, SIGCONT) == 0);
  std::this_thread::sleep_for(1000ms);
  CHECK(w.current() == old);  // waited out
  CHECK(w.watchdog->restarts() == 0);
  REQUIRE(::kill(old, SIGSTOP) == 0);
  const pid_t now = w.replacement_of(old);
  REQUIRE(now > 0);
  CHECK_FALSE(process_alive(old));  // the frozen one is gone, not left holding memory
  const auto said = w.said();
  REQUIRE(said.size() == 1u);
  CHECK(said[0].find("did not answer PING") != std::string::npos);
}

}  // namespace troupe::gcs
