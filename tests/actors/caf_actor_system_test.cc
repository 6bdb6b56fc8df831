// ActorSystem: options, publish, and connect with a deadline (refused, silent peer, no actor).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/node_manager_client.h"
#include "caf/actor_system.hpp"
#include "caf/io/middleman.hpp"
#include "tests/actors/caf_test_util.h"

using namespace troupe;
using namespace troupe::actors;

namespace {

// A listening TCP socket on 127.0.0.1 that accepts nothing and says nothing (RAII).
struct SilentListener {
  int fd = -1;
  uint16_t port = 0;
  SilentListener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd, 4) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port = ntohs(addr.sin_port);
  }
  ~SilentListener() { if (fd >= 0) ::close(fd); }
};

// A port on 127.0.0.1 that nothing listens on (bound once, then released).
uint16_t closed_port() {
  SilentListener l;
  uint16_t p = l.port;
  ::close(l.fd);
  l.fd = -1;
  return p;
}

}  // namespace

TEST_CASE("actor system options are validated with the field named", "[actors]") {
  ActorSystemOptions o;
  CHECK(o.validate().ok());
  o.scheduler_policy = "round-robin";
  Status st = o.validate();
  CHECK(st.code() == Code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("round-robin") && Catch::Contains("stealing"));
  o = ActorSystemOptions{};
  o.connect_timeout = std::chrono::milliseconds(0);
  CHECK(!o.validate().ok());
  auto started = ActorSystem::start(o);
  REQUIRE(!started.ok());
  CHECK_THAT(started.status().message(), Catch::Contains("connect timeout"));
}

TEST_CASE("both scheduler policies start, publish on a picked port and connect", "[actors]") {
  for (const char* policy : {"stealing", "sharing"}) {
    INFO(policy);
    test::TestNode node(nullptr, policy);
    CHECK(node.port != 0);
    auto head = test::start_head();
    auto nm = head->connect("127.0.0.1", node.port, std::chrono::seconds(5));
    REQUIRE(nm.ok());
    auto hb = NodeManagerClient(head->system(), *nm).ping(7);
    REQUIRE(hb.ok());
    CHECK(hb->seq == 7);
    CHECK(hb->node_id.size() == 32);
  }
}

TEST_CASE("connecting to a closed port fails within the deadline, saying what to do", "[actors]") {
  auto head = test::start_head();
  const uint16_t port = closed_port();
  auto nm = head->connect("127.0.0.1", port, std::chrono::seconds(2));
  REQUIRE(!nm.ok());
  CHECK(nm.status().code() == Code::unavailable);
  CHECK_THAT(nm.status().message(),
             Catch::Contains("cannot reach node at 127.0.0.1:" + std::to_string(port) +
                             " within 2 s") &&
                 Catch::Contains("is the node running?"));
}

TEST_CASE("a peer that accepts but never answers runs into the deadline", "[actors]") {
  auto head = test::start_head();
  SilentListener silent;
  auto nm = head->connect("127.0.0.1", silent.port, std::chrono::milliseconds(300));
  REQUIRE(!nm.ok());
  CHECK(nm.status().code() == Code::timeout);
  CHECK_THAT(nm.status().message(), Catch::Contains("within 300 ms"));
}

TEST_CASE("a node port with no actor published is not_found", "[actors]") {
  auto node = test::start_head();
  auto opened = node->system().middleman().open(0, "127.0.0.1");
  REQUIRE(opened);
  auto head = test::start_head();
  auto nm = head->connect("127.0.0.1", *opened, std::chrono::seconds(2));
  REQUIRE(!nm.ok());
  CHECK(nm.status().code() == Code::not_found);
  CHECK_THAT(nm.status().message(), Catch::Contains("no actor published"));
}

TEST_CASE("publishing on a port in use fails naming address and port", "[actors]") {
  SilentListener taken;
  auto sys = test::start_head();
  auto nm = spawn_node_manager(sys->system(), {});
  sys->track(nm);
  auto bound = sys->publish(nm, taken.port);
  REQUIRE(!bound.ok());
  CHECK(bound.status().code() == Code::io_error);
  CHECK_THAT(bound.status().message(),
             Catch::Contains("127.0.0.1:" + std::to_string(taken.port)));
}

TEST_CASE("host:port addresses parse, and bad ones are named", "[actors]") {
  auto hp = parse_host_port("10.0.0.7:4711");
  REQUIRE(hp.ok());
  CHECK(hp->first == "10.0.0.7");
  CHECK(hp->second == 4711);
  CHECK(!parse_host_port("10.0.0.7").ok());
  CHECK(!parse_host_port("host:0").ok());
  CHECK(!parse_host_port("host:70000").ok());
  CHECK_THAT(parse_host_port("host:x1").status().message(), Catch::Contains("'x1'"));
}
