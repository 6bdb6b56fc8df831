// Which transport a group gets from where its members run (collectives/group_transport.h).
#include <catch2/catch.hpp>

#include "collectives/group_transport.h"

using namespace troupe;
using namespace troupe::collectives;

namespace {

gcs::GroupMember member(const std::string& address, const NodeId& node = NodeId()) {
  gcs::GroupMember m;
  m.address = address;
  m.node = node;
  return m;
}

}  // namespace

TEST_CASE("host_layout: members are grouped by node id, or by their address's host without one") {
  const NodeId a = NodeId::random(), b = NodeId::random();
  CHECK(host_layout({member("10.0.0.1:5", a), member("10.0.0.9:6", b), member("10.0.0.1:7", a)}) ==
        std::vector<int>{0, 1, 0});
  CHECK(host_layout({member("10.0.0.1:5"), member("10.0.0.1:6"), member("10.0.0.2:7")}) == std::vector<int>{0, 0, 1});
  // A node id wins over the address: two nodes may share an address in tests (network namespaces).
  CHECK(host_layout({member("127.0.0.1:5", a), member("127.0.0.1:6", b)}) == std::vector<int>{0, 1});
}

TEST_CASE("choose_group_transport: shm on one node, tcp one per node, hierarchical in between") {
  CHECK(*choose_group_transport("auto", {0, 0, 0}) == "shm");
  CHECK(*choose_group_transport("auto", {0, 1, 2}) == "tcp");
  CHECK(*choose_group_transport("auto", {0, 0, 1, 1}) == "hierarchical");
  CHECK(*choose_group_transport("auto", {0, 1, 1}) == "hierarchical");
  CHECK(*choose_group_transport("auto", {0}) == "tcp");
  CHECK(*choose_group_transport("tcp", {0, 0}) == "tcp");
  CHECK(*choose_group_transport("hierarchical", {0, 0}) == "hierarchical");
  auto split = choose_group_transport("shm", {0, 1});
  REQUIRE_FALSE(split.ok());
  CHECK(split.status().message().find("2 nodes") != std::string::npos);
  auto bad = choose_group_transport("rdma", {0, 1});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == Code::invalid_argument);
  CHECK(bad.status().message().find("auto, shm, tcp or hierarchical") != std::string::npos);
}
