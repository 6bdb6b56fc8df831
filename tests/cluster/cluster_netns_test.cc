// Two hosts on one machine: two network namespaces joined by a veth pair (10.231.7.1/24 and
// 10.231.7.2/24, test-only addresses), a cluster up in the first and a node joining it from the
// second over the "network". Needs root and iproute2; where namespaces cannot be made the test
// says so loudly and passes.
#include <catch2/catch.hpp>

#include "tests/cluster/cluster_fixture.h"
#include "tests/support/netns_pair.h"

using namespace troupe::testing;

namespace {

constexpr const char* kHostA = "10.231.7.1";
constexpr const char* kHostB = "10.231.7.2";

}  // namespace

TEST_CASE("a node in another network namespace joins a head over a veth pair", "[cluster]") {
  if (::geteuid() != 0) {
    WARN("SKIPPED: two-host test needs root to create network namespaces");
    return;
  }
  if (run_command("ip -V", 10).exit_code != 0) {
    WARN("SKIPPED: two-host test needs iproute2 (`ip`), which is not installed");
    return;
  }
  NetnsPair net(kHostA, kHostB);  // declared first: destroyed after both clusters are down
  if (!net.ok()) {
    WARN("SKIPPED: cannot create network namespaces here: " << net.error());
    return;
  }
  // A fresh veth pair reports NO-CARRIER for a moment: wait until both ends are up.
  REQUIRE(poll_until([&] { return net.link_up(); }, std::chrono::seconds(10)));

  ClusterFixture a(net.exec_in_a());
  ClusterFixture b(net.exec_in_b());
  a.up(std::string("--bind ") + kHostA + " --cpus 1");
  const Json info = a.cluster_file();
  INFO("cluster.json of A: " << info.dump());
  CHECK(info.at("head_address").get<std::string>().rfind(std::string(kHostA) + ":", 0) == 0);
  // The GCS must be reachable from the other host, so the embedded redis listens on --bind too.
  CHECK(info.at("redis_host") == kHostA);

  auto join = b.troupe("up --address " + info.at("head_address").get<std::string>() + " --token " +
                           info.at("token").get<std::string>() + " --bind " + kHostB + " --cpus 1 --timeout 30",
                       60);
  INFO("join from B:\n" << join.both() << "\nlogs of A:" << a.logs_tail() << "\nlogs of B:" << b.logs_tail());
  REQUIRE(join.exit_code == 0);

  Json view;
  const bool both_alive = poll_until(
      [&] {
        view = a.status();
        return nodes_in_state(view, "ALIVE").size() == 2;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(200));
  INFO("nodes: " << view.at("nodes").dump(2));
  REQUIRE(both_alive);
  bool remote = false;
  for (const Json& n : view.at("nodes")) {
    const std::string address = n.at("address");
    if (address.rfind(std::string(kHostB) + ":", 0) == 0) {
      remote = true;
      CHECK(!n.at("is_head").get<bool>());
    }
  }
  CHECK(remote);
}
