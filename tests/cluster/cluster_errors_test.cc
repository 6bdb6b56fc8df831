// Bad input to a cluster, each met with a clear error and a non-zero exit: a wrong join token, a
// node of another version, a head nobody listens at, a port already taken, a malformed record in
// the GCS, and `up` where a cluster is already up.
#include <catch2/catch.hpp>

#include "tests/cluster/cluster_fixture.h"

using namespace troupe::testing;

namespace {

// A listening TCP socket on 127.0.0.1 held for the test's lifetime: the port stays in use.
class HeldPort {
 public:
  HeldPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 4) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~HeldPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace

TEST_CASE("joining is refused with a wrong token or another version and up twice is refused", "[cluster]") {
  ClusterFixture head;
  head.up("--cpus 1");
  const Json info = head.cluster_file();
  const std::string address = info.at("head_address");
  const std::string token = info.at("token");

  // Each joiner gets its own session (TROUPE_HOME), as another machine would have.
  {
    ClusterFixture joiner;
    auto r = joiner.troupe("up --address " + address + " --token 0123456789abcdef0123456789abcdef --timeout 20", 60);
    INFO(r.both());
    CHECK(r.exit_code != 0);
    CHECK(r.both().find("wrong cluster token") != std::string::npos);
  }
  {
    ClusterFixture joiner;
    auto r = joiner.troupe("up --address " + address + " --token " + token + " --timeout 20", 60,
                           "TROUPE_NODE_VERSION_OVERRIDE=9.9.9");
    INFO(r.both());
    CHECK(r.exit_code != 0);
    CHECK(r.both().find("9.9.9") != std::string::npos);
    CHECK(r.both().find(info.at("version").get<std::string>()) != std::string::npos);
  }
  // Neither refused node made it into the cluster.
  Json view = head.status();
  CHECK(view.at("nodes").size() == 1);

  // A second `up` in the same session is refused and leaves the running cluster alone.
  const pid_t head_pid = head.pid_of("head");
  auto twice = head.troupe("up --nodes 1", 60);
  INFO(twice.both());
  CHECK(twice.exit_code != 0);
  CHECK(twice.both().find("already up") != std::string::npos);
  CHECK(head.pid_of("head") == head_pid);
  CHECK(!process_gone(head_pid));
  CHECK(head.cluster_file().at("token") == token);
}

TEST_CASE("a malformed record in the GCS makes status fail naming the record", "[cluster]") {
  ClusterFixture c;
  c.up("--cpus 1");
  const Json info = c.cluster_file();
  auto hset = run_command("redis-cli -h " + info.at("redis_host").get<std::string>() + " -p " +
                              std::to_string(info.at("redis_port").get<int>()) + " -a " +
                              info.at("redis_password").get<std::string>() +
                              " --no-auth-warning HSET troupe:t:nodes badkey garbage",
                          30);
  INFO(hset.both());
  REQUIRE(hset.exit_code == 0);
  REQUIRE(hset.out.find("1") != std::string::npos);  // one field added

  for (const std::string args : {"status", "status --json"}) {
    auto r = c.troupe(args, 30);
    INFO("troupe " << args << "\n" << r.both());
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("nodes/badkey") != std::string::npos);
  }
}

TEST_CASE("joining a head nobody listens at fails within the timeout", "[cluster]") {
  ClusterFixture c;
  const int closed = free_loopback_port();
  const auto start = Clock::now();
  auto r = c.troupe("up --address 127.0.0.1:" + std::to_string(closed) + " --token x --timeout 5", 60);
  const auto took = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count();
  INFO(r.both() << "\ntook " << took << " s");
  CHECK(r.exit_code != 0);
  CHECK(r.exit_code != 124);  // it gave up by itself, not by the test's timeout
  CHECK(r.both().find("127.0.0.1:" + std::to_string(closed)) != std::string::npos);
  CHECK(c.session_pids().empty());  // the node that could not join does not linger
}

TEST_CASE("up on a port already in use fails naming the port and leaves nothing running", "[cluster]") {
  ClusterFixture c;
  HeldPort held;
  auto r = c.troupe("up --port " + std::to_string(held.port()) + " --timeout 20", 60);
  INFO(r.both() << c.logs_tail());
  CHECK(r.exit_code != 0);
  CHECK(r.both().find(std::to_string(held.port())) != std::string::npos);
  CHECK(c.session_pids().empty());
}
