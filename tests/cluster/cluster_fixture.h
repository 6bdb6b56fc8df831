// End-to-end tests of a real cluster on this machine: the `troupe` binary brings up an embedded
// redis-server, a head and node processes, and the tests drive it only through the CLI, as a user
// would (`up`, `status --json`, `spawn`, `call`, `down`).
//
// ClusterFixture gives each test case its own TROUPE_HOME and guarantees that nothing it started
// outlives the test, even when a REQUIRE throws: its destructor runs `troupe down`, then SIGKILLs
// every pid it ever saw in the session's pid files (or was told about with track()) that is still
// running. Waiting is always polling against a deadline (poll_until), never a bare sleep.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gcs/redis_server.h"
#include "gcs/redis_store.h"
#include "tests/core/temp_dir.h"
#include "tests/support/run_command.h"

namespace troupe::testing {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// The documented detection bound: a node silent for node_dead_after_ms (default 2000) is DEAD.
// Tests allow generous slack on top for a loaded 2-core machine; this is what users rely on.
constexpr auto kNodeDeadAfter = std::chrono::milliseconds(2000);
constexpr auto kDetectionSlack = std::chrono::milliseconds(3000);

// True when `pid` no longer runs: no such process, or a zombie (exited, not yet reaped — the
// cluster's processes are detached, so init, not the test, reaps them).
inline bool process_gone(pid_t pid) {
  if (pid <= 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  auto close = line.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  const char state = line[close + 2];
  return state == 'Z' || state == 'X';
}

// A TCP port on 127.0.0.1 that was free a moment ago (gcs::pick_free_port).
inline int free_loopback_port() {
  auto port = troupe::gcs::pick_free_port();
  REQUIRE(port.ok());
  return *port;
}

// True when a TCP connection to 127.0.0.1:port is accepted.
inline bool loopback_port_accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// The node entries of a `status --json` document, and those of them in a state.
inline std::vector<Json> nodes_in_state(const Json& view, const std::string& state) {
  std::vector<Json> out;
  for (const Json& n : view.at("nodes")) {
    if (n.at("state") == state) out.push_back(n);
  }
  return out;
}

class ClusterFixture {
 public:
  // `prefix` is put before every troupe command (e.g. `ip netns exec nsA`).
  explicit ClusterFixture(std::string prefix = "") : prefix_(std::move(prefix)) {}

  ~ClusterFixture() {
    remember_pids();
    run_command(prefix_ + " env TROUPE_HOME=" + home_.path() + " " + troupe_binary() + " down", 60);
    remember_pids();
    for (pid_t pid : seen_pids_) {
      if (!process_gone(pid)) ::kill(pid, SIGKILL);  // last resort: never leave a process behind
    }
    // A head killed just after its GCS may have started the GCS again (gcs/redis_watchdog.h): its
    // new pid is in the session's pid file by then.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    remember_pids();
    for (pid_t pid : seen_pids_) {
      if (!process_gone(pid)) ::kill(pid, SIGKILL);
    }
  }
  ClusterFixture(const ClusterFixture&) = delete;
  ClusterFixture& operator=(const ClusterFixture&) = delete;

  const std::string& home() const { return home_.path(); }
  std::string session_dir() const { return home_.path() + "/session"; }

  // Runs `troupe <args>` with this fixture's TROUPE_HOME (and `env`: extra NAME=VALUE words).
  CommandResult troupe(const std::string& args, int timeout_s = 120, const std::string& env = "") {
    auto r = run_command(prefix_ + " env TROUPE_HOME=" + home_.path() + " " + env + " " + troupe_binary() + " " + args,
                         timeout_s);
    remember_pids();
    return r;
  }

  // `troupe up <args>`, required to succeed.
  CommandResult up(const std::string& args, int timeout_s = 90) {
    auto r = troupe("up " + args, timeout_s);
    INFO("troupe up " << args << "\n" << r.both() << logs_tail());
    REQUIRE(r.exit_code == 0);
    return r;
  }

  // `troupe up` from a cluster file: `nodes` nodes of `cpus` cpus and a head offering half a cpu, so
  // the head holds none of a job's actors of one cpu, and a node SIGKILLed takes actors with it. The
  // spread placement is then the same whatever the nodes' random ids (worker-0, worker-1, ..., then
  // the servers, on the nodes in turn).
  CommandResult up_beside_head(int nodes, int cpus) {
    const std::string file = home_.path() + "/nodes-beside-head.yaml";
    std::ofstream(file) << "provider: local\nhead:\n  cpus: 0.5\nnode_types:\n  - name: cpu\n    count: " << nodes
                        << "\n    cpus: " << cpus << "\n";
    return up(file);
  }

  // `troupe status --json`, required to succeed and to parse.
  Json status(int events = 10) {
    auto r = troupe("status --json --events " + std::to_string(events), 60);
    INFO(r.both());
    REQUIRE(r.exit_code == 0);
    return Json::parse(r.out);
  }

  // `troupe status --json` or null when it fails (for polling through outages).
  Json try_status(int events = 10) {
    auto r = troupe("status --json --events " + std::to_string(events), 30);
    if (r.exit_code != 0) return Json();
    try {
      return Json::parse(r.out);
    } catch (const Json::exception&) {
      return Json();
    }
  }

  // cluster.json of the session.
  Json cluster_file() const { return Json::parse(slurp(session_dir() + "/cluster.json")); }

  // The pid in pids/<role>.pid, or 0.
  pid_t pid_of(const std::string& role) const {
    std::ifstream f(session_dir() + "/pids/" + role + ".pid");
    long pid = 0;
    return f >> pid ? static_cast<pid_t>(pid) : 0;
  }

  // The GCS's redis-server after `old` was killed: the one the head's watchdog started (its pid
  // in the session's pid file, alive, tracked); 0 when none within `limit`.
  pid_t restarted_gcs(pid_t old, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    pid_t now = 0;
    const bool back = poll_until([&] {
      now = pid_of("redis");
      return now > 0 && now != old && !process_gone(now);
    }, limit, std::chrono::milliseconds(50));
    if (!back) return 0;
    track(now);
    return now;
  }

  // role -> pid for every pid file of the session now.
  std::map<std::string, pid_t> session_pids() const {
    std::map<std::string, pid_t> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(session_dir() + "/pids", ec)) {
      if (e.path().extension() != ".pid") continue;
      const std::string role = e.path().stem().string();
      if (pid_t pid = pid_of(role)) out[role] = pid;
    }
    return out;
  }

  // An external redis-server on a free loopback port, as `up --redis` users run one, with password
  // `password`, its files under home()/external-redis and `extra` arguments; tracked (stopped with
  // the fixture). Returns its port; *pid (if given) gets its pid.
  int start_external_redis(const std::string& password, const std::string& extra, pid_t* pid = nullptr) {
    const int port = free_loopback_port();
    const std::string dir = home_.path() + "/external-redis";
    std::filesystem::create_directories(dir);
    auto started = run_command("redis-server --port " + std::to_string(port) + " --bind 127.0.0.1 --requirepass " +
                               password + " --daemonize yes --dir " + dir + " --pidfile " + dir +
                               "/redis.pid --logfile " + dir + "/redis.log " + extra);
    INFO(started.both());
    REQUIRE(started.exit_code == 0);
    REQUIRE(poll_until([&] { return loopback_port_accepts(port); }, std::chrono::seconds(10)));
    pid_t started_pid = 0;
    REQUIRE(poll_until([&] {
      std::ifstream f(dir + "/redis.pid");
      return static_cast<bool>(f >> started_pid) && started_pid > 0;
    }, std::chrono::seconds(10)));
    track(started_pid);
    if (pid) *pid = started_pid;
    return port;
  }

  // SIGKILLs the head process, waits until it is gone, and starts it again (`troupe up --restart-head
  // ARGS`), REQUIREd to succeed.
  void kill_and_restart_head(const std::string& args = "") {
    const pid_t head_pid = pid_of("head");
    REQUIRE(head_pid > 0);
    REQUIRE(::kill(head_pid, SIGKILL) == 0);
    REQUIRE(poll_until([&] { return process_gone(head_pid); }, std::chrono::seconds(10)));
    auto restarted = troupe("up --restart-head " + args, 60);
    INFO(restarted.both() << logs_tail());
    REQUIRE(restarted.exit_code == 0);
  }

  // A pid the fixture must stop at the end if it still runs (e.g. a redis-server the test restarted).
  void track(pid_t pid) { seen_pids_.insert(pid); }

  // The last lines of every log of the session, for failure messages.
  std::string logs_tail() const {
    std::string out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(session_dir() + "/logs", ec)) {
      if (e.path().extension() != ".log") continue;
      auto r = run_command("tail -n 8 " + e.path().string(), 10);
      out += "\n--- " + e.path().filename().string() + "\n" + r.out;
    }
    return out;
  }

 private:
  void remember_pids() {
    for (const auto& [role, pid] : session_pids()) seen_pids_.insert(pid);
  }

  std::string prefix_;
  // Under the build tree's test-homes/: the cleanup fixture (tests/cleanup_test_clusters.sh) stops
  // whatever a test killed by its timeout left running there, and touches no other cluster.
  TempDir home_{std::string(TROUPE_BINARY_DIR) + "/test-homes"};
  std::set<pid_t> seen_pids_;
};

// The cluster's GCS itself (its redis-server, as the session's cluster.json says how to reach it):
// for what a test must count from the store rather than from the CLI's view.
inline std::unique_ptr<troupe::gcs::RedisStore> cluster_gcs(const ClusterFixture& c) {
  const Json info = c.cluster_file();
  troupe::gcs::RedisStoreOptions o;
  o.redis.host = info.at("redis_host").get<std::string>();
  o.redis.port = info.at("redis_port").get<int>();
  o.redis.password = info.at("redis_password").get<std::string>();
  auto store = troupe::gcs::RedisStore::connect(o);
  REQUIRE(store.ok());
  return std::move(*store);
}

}  // namespace troupe::testing
