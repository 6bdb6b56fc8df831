// A cluster over two hosts for the cut-link tests: two network namespaces joined by a veth pair
// (tests/support/netns_pair.h), host A running the head and the `troupe up` flags' nodes, host B
// one node of 2 cpus that joined A's head. Cutting B's end of the link (cut_b) leaves B's processes
// running but unreachable, as a failed switch or cable would.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "tests/cluster/cluster_fixture.h"
#include "tests/support/netns_pair.h"

namespace troupe::testing {

struct TwoHosts {
  NetnsPair net;
  ClusterFixture a, b;
  TwoHosts(const std::string& ip_a, const std::string& ip_b, const std::string& tag)
      : net(ip_a, ip_b, tag), a(net.exec_in_a()), b(net.exec_in_b()) {}
  // B's node's address starts with this.
  std::string b_prefix() const { return net.host_b() + ":"; }
  void cut_b() {
    auto cut = run_command("ip -n " + net.ns_b() + " link set dev " + net.dev_b() + " down", 20);
    REQUIRE(cut.exit_code == 0);
  }
};

// Brings both hosts up (`up_a`: host A's `troupe up` flags besides --bind); null, after a WARN
// saying SKIPPED and why, where network namespaces cannot be made (not root, no ip netns).
inline std::unique_ptr<TwoHosts> two_hosts(const std::string& ip_a, const std::string& ip_b, const std::string& tag,
                                           const std::string& up_a) {
  if (::geteuid() != 0) {
    WARN("SKIPPED: the cut-link tests need root to create network namespaces");
    return nullptr;
  }
  auto h = std::make_unique<TwoHosts>(ip_a, ip_b, tag + std::to_string(::getpid() % 100000));
  if (!h->net.ok()) {
    WARN("SKIPPED: cannot create network namespaces here: " << h->net.error());
    return nullptr;
  }
  REQUIRE(poll_until([&] { return h->net.link_up(); }, std::chrono::seconds(10)));
  h->a.up("--bind " + h->net.host_a() + " " + up_a);
  const Json info = h->a.cluster_file();
  auto join = h->b.troupe("up --address " + info.at("head_address").get<std::string>() + " --token " +
                          info.at("token").get<std::string>() + " --bind " + h->net.host_b() + " --cpus 2 --timeout 30",
                          60);
  INFO(join.both() << h->a.logs_tail() << h->b.logs_tail());
  REQUIRE(join.exit_code == 0);
  return h;
}

}  // namespace troupe::testing
