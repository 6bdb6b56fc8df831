// The embedded redis-server and the failures users meet: wrong password, unreachable server, a
// restart under a live client (nothing lost), a port already in use, detached start and stop.
#include "gcs/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>

#include "gcs/child_process.h"
#include "gcs/redis_store.h"
#include "gcs/tables.h"
#include "tests/core/temp_dir.h"
#include "tests/gcs/redis_fixture.h"

namespace troupe::gcs {

using namespace std::chrono_literals;
using troupe::testing::TempDir;

namespace {

std::unique_ptr<RedisServer> start_server(const TempDir& dir, int port = 0, bool detach = false) {
  RedisServerOptions o;
  o.session_dir = dir.path();
  o.port = port;
  o.detach = detach;
  auto server = RedisServer::start(o);
  INFO(server.status().to_string());
  REQUIRE(server.ok());
  return std::move(server.value());
}

NodeRecord node(int i) {
  NodeRecord r;
  r.id = NodeId::random();
  r.pid = i;
  r.hostname = "host" + std::to_string(i);
  return r;
}

}  // namespace

TEST_CASE("redis server: starts on a free port with a generated password, and stops", "[gcs][redis][server]") {
  TempDir dir;
  auto server = start_server(dir);
  CHECK(server->port() > 0);
  CHECK(server->password().size() == 32);
  CHECK(std::filesystem::exists(server->conf_file()));
  CHECK((std::filesystem::status(server->conf_file()).permissions() & std::filesystem::perms::others_read) ==
        std::filesystem::perms::none);
  const pid_t pid = server->pid();
  CHECK(process_alive(pid));
  auto client = RedisClient::connect(server->client_options());
  REQUIRE(client.ok());
  REQUIRE(server->stop().ok());
  CHECK_FALSE(process_alive(pid));
  CHECK(server->stop().ok());  // again: nothing to do
}

TEST_CASE("redis client: a wrong or missing password is a clear invalid_argument", "[gcs][redis][server]") {
  RedisServer& server = testing::shared_redis();
  RedisOptions o = server.client_options();
  o.password = "not-the-password";
  auto wrong = RedisClient::connect(o);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().code() == Code::invalid_argument);
  CHECK_THAT(wrong.status().message(), Catch::Contains("AUTH failed"));
  CHECK_THAT(wrong.status().message(), Catch::Contains("--redis-password"));
  CHECK_THAT(wrong.status().message(), Catch::Contains("127.0.0.1:" + std::to_string(server.port())));
  CHECK_THAT(wrong.status().message(), !Catch::Contains("not-the-password"));

  o.password.clear();
  auto none = RedisClient::connect(o);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == Code::invalid_argument);
  CHECK_THAT(none.status().message(), Catch::Contains("requires a password"));
}

TEST_CASE("redis client: an unreachable server is unavailable within the reconnect deadline", "[gcs][redis][server]") {
  auto port = pick_free_port();  // nothing listens there
  REQUIRE(port.ok());
  RedisOptions o;
  o.port = *port;
  o.reconnect_attempts = 100;
  o.reconnect_deadline = 1000ms;
  const auto t0 = std::chrono::steady_clock::now();
  auto c = RedisClient::connect(o);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == Code::unavailable);
  CHECK_THAT(c.status().message(), Catch::Contains("127.0.0.1:" + std::to_string(*port)));
  CHECK_THAT(c.status().message(), Catch::Contains("gave up after"));
  WARN("unreachable server reported after "
       << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms (deadline 1000 ms)");
  CHECK(elapsed < 1000ms + 10s);  // generous slack: this guards against hanging, not speed
}

TEST_CASE("redis store: a restart under a live client loses no record", "[gcs][redis][server]") {
  TempDir dir;
  auto server = start_server(dir);
  RedisStoreOptions o;
  o.redis = server->client_options();
  auto store = RedisStore::connect(o);
  REQUIRE(store.ok());
  Table<NodeRecord> nodes(**store);
  auto sub = (*store)->subscribe({"nodes"});
  REQUIRE(sub.ok());

  std::vector<NodeRecord> written;
  for (int i = 0; i < 50; ++i) {
    written.push_back(node(i));
    REQUIRE(nodes.put(written.back()).ok());
  }
  REQUIRE((*store)->append("log", "before", 100).ok());
  const pid_t old_pid = server->pid();
  REQUIRE(server->restart().ok());  // SIGTERM: the append-only file is flushed
  CHECK(server->pid() != old_pid);

  // The same store object goes on working: it notices the closed connection and reconnects.
  for (int i = 50; i < 100; ++i) {
    written.push_back(node(i));
    Status st = nodes.put(written.back());
    INFO(st.to_string());
    REQUIRE(st.ok());
  }
  CHECK((*store)->client().reconnects() >= 1);
  auto listed = nodes.list();
  REQUIRE(listed.ok());
  CHECK(listed->size() == 100);
  for (const NodeRecord& r : written) {
    auto got = nodes.get(r.id.hex());
    REQUIRE(got.ok());
    CHECK(got->hostname == r.hostname);
  }
  CHECK((*store)->read_recent("log", 10)->size() == 1);

  // The subscription reconnects too, says it may have missed messages, then delivers again.
  bool resynced = false;
  for (int i = 0; i < 200 && !resynced; ++i) {
    auto n = (*sub)->next(50ms);
    REQUIRE(n.ok());
    resynced = n->has_value() && (*n)->channel == kResyncChannel;
  }
  CHECK(resynced);
  REQUIRE(nodes.put(node(1000)).ok());
  bool delivered = false;
  for (int i = 0; i < 200 && !delivered; ++i) {
    auto n = (*sub)->next(50ms);
    REQUIRE(n.ok());
    delivered = n->has_value() && (*n)->channel == "nodes";
  }
  CHECK(delivered);
}

TEST_CASE("redis store: calls while the server is down fail as unavailable, then work again", "[gcs][redis][server]") {
  TempDir dir;
  auto server = start_server(dir);
  RedisStoreOptions o;
  o.redis = server->client_options();
  o.redis.reconnect_attempts = 3;
  o.redis.reconnect_deadline = 500ms;
  auto store = RedisStore::connect(o);
  REQUIRE(store.ok());
  REQUIRE((*store)->put("t", "k", "v").ok());
  REQUIRE(server->stop().ok());
  Status down = (*store)->put("t", "k", "w");
  CHECK(down.code() == Code::unavailable);
  CHECK_THAT(down.message(), Catch::Contains(std::to_string(server->port())));
  REQUIRE(server->restart().ok());
  auto v = (*store)->get("t", "k");
  REQUIRE(v.ok());
  CHECK(**v == "v");
}

TEST_CASE("redis server: a port already in use is an error naming the port and the log", "[gcs][redis][server]") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 4) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const int port = ntohs(addr.sin_port);

  TempDir dir;
  RedisServerOptions o;
  o.session_dir = dir.path();
  o.port = port;
  o.start_timeout = 5000ms;
  auto server = RedisServer::start(o);
  ::close(fd);
  REQUIRE_FALSE(server.ok());
  CHECK(server.status().code() == Code::unavailable);
  CHECK_THAT(server.status().message(), Catch::Contains(std::to_string(port)));
  CHECK_THAT(server.status().message(), Catch::Contains(dir.file("redis.log")));
  CHECK_THAT(server.status().message(), Catch::Contains("Address already in use"));
}

TEST_CASE("redis server: a missing redis-server binary is named", "[gcs][redis][server]") {
  TempDir dir;
  RedisServerOptions o;
  o.session_dir = dir.path();
  o.redis_server = dir.file("no-such-redis-server");
  auto server = RedisServer::start(o);
  REQUIRE_FALSE(server.ok());
  CHECK(server.status().code() == Code::invalid_argument);
  CHECK_THAT(server.status().message(), Catch::Contains("no-such-redis-server"));
}

TEST_CASE("redis server: a detached server outlives its object and stop_pid stops it", "[gcs][redis][server]") {
  TempDir dir;
  struct StopAtExit {  // the server must not outlive a failed test
    std::string pid_file;
    ~StopAtExit() { (void)stop_pid(pid_file, 2000ms); }
  } guard{dir.file("redis.pid")};
  pid_t pid = -1;
  RedisOptions client_options;
  {
    auto server = start_server(dir, 0, /*detach=*/true);
    pid = server->pid();
    client_options = server->client_options();
    CHECK(std::filesystem::exists(server->pid_file()));
  }
  CHECK(process_alive(pid));
  auto c = RedisClient::connect(client_options);
  REQUIRE(c.ok());
  REQUIRE((*c)->command({"SET", "k", "v"}).ok());
  REQUIRE(stop_pid(dir.file("redis.pid"), 5000ms).ok());
  CHECK_FALSE(process_alive(pid));
  CHECK_FALSE(std::filesystem::exists(dir.file("redis.pid")));
  CHECK(stop_pid(dir.file("redis.pid")).code() == Code::not_found);
}

}  // namespace troupe::gcs
