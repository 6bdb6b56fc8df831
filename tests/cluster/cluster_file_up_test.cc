// `troupe up CLUSTER.yaml`: the local provider starts each node type with its resources; the ssh
// provider runs the join command on every host (here through a fake ssh that runs it locally, on
// loopback addresses, which is all this machine may reach).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>

#include "tests/cluster/cluster_fixture.h"

using namespace troupe::testing;

TEST_CASE("up with a local cluster file starts every node type with its resources", "[cluster][cluster_file]") {
  ClusterFixture c;
  const std::string file = c.home() + "/cluster.yaml";
  std::ofstream(file) << "cluster_name: two-types\n"
                         "provider: local\n"
                         "head:\n  cpus: 1\n"
                         "node_types:\n"
                         "  - name: small\n    count: 2\n    cpus: 1\n"
                         "  - name: big\n    count: 1\n    cpus: 3\n";
  auto up = c.up(file);
  CHECK(up.out.find("'two-types'") != std::string::npos);
  Json view = c.status();
  INFO(view.dump(2));
  REQUIRE(nodes_in_state(view, "ALIVE").size() == 4);
  std::multiset<double> cpus;
  for (const Json& n : view.at("nodes")) cpus.insert(n.at("resources").at("total").at("cpus").get<double>());
  CHECK(cpus == std::multiset<double>{1, 1, 1, 3});
}

TEST_CASE("up with an ssh cluster file joins each host through ssh", "[cluster][cluster_file]") {
  ClusterFixture c;
  // A stand-in for ssh: its last argument is the remote command; run it here.
  const std::string fake_ssh = c.home() + "/fake-ssh";
  std::ofstream(fake_ssh) << "#!/bin/sh\nfor last; do :; done\necho \"fake-ssh: $last\"\nexec sh -c \"$last\"\n";
  ::chmod(fake_ssh.c_str(), 0755);
  const std::string file = c.home() + "/ssh.yaml";
  std::ofstream(file) << "provider: ssh\n"
                         "head:\n  bind: 127.0.0.1\n"
                         "node_types:\n"
                         "  - name: remote\n    cpus: 2\n    hosts: [127.0.0.2, 127.0.0.3]\n"
                         "ssh:\n  user: tester\n  troupe: "
                      << troupe_binary() << "\n  command: [" << fake_ssh << "]\n";
  auto up = c.up(file);
  Json view = c.status();
  INFO(view.dump(2));
  REQUIRE(nodes_in_state(view, "ALIVE").size() == 3);
  int remote = 0;
  for (const Json& n : view.at("nodes")) {
    const std::string address = n.at("address").get<std::string>();
    remote += address.rfind("127.0.0.2:", 0) == 0 || address.rfind("127.0.0.3:", 0) == 0;
  }
  CHECK(remote == 2);
  // The ssh command line carried user@host and the join command.
  const std::string log = slurp(c.session_dir() + "/logs/ssh-127.0.0.2.log");
  CHECK(log.find("'up' '--address'") != std::string::npos);
}

TEST_CASE("a broken cluster file is refused naming the line and the field", "[cluster][cluster_file]") {
  ClusterFixture c;
  const std::string file = c.home() + "/broken.yaml";
  std::ofstream(file) << "provider: local\nnode_types:\n  - name: w\n    count: three\n";
  auto r = c.troupe("up " + file);
  INFO(r.both());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("broken.yaml:4: node_types[0].count") != std::string::npos);
  CHECK(c.session_pids().empty());  // nothing was started
}
