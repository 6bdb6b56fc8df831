#include "actors/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include <catch2/catch.hpp>

#include "tests/actors/actor_test_util.h"

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::testing;
using gcs::NodeState;

namespace {

NodeView node(uint32_t n, gcs::Resources total, gcs::NodeState state = gcs::NodeState::alive) {
  NodeView v;
  v.id = node_id(n);
  v.state = state;
  v.total = total;
  return v;
}

PlacementRequest request(uint32_t n, gcs::Resources demand, std::string group = "") {
  PlacementRequest r;
  r.actor = actor_id(n);
  r.demand = demand;
  r.group = std::move(group);
  return r;
}

std::map<NodeId, int> count_by_node(const ScheduleResult& r) {
  std::map<NodeId, int> counts;
  for (const auto& p : r.placements) ++counts[p.node];
  return counts;
}

std::vector<PlacementRequest> ones(int n, double cpus = 1, uint32_t first_id = 1) {
  std::vector<PlacementRequest> out;
  for (int i = 0; i < n; ++i) out.push_back(request(first_id + i, res(cpus)));
  return out;
}

ScheduleResult run(PlacementPolicy policy, const std::vector<NodeView>& nodes,
                   const std::vector<PlacementRequest>& requests) {
  Scheduler s({policy});
  auto r = s.schedule(nodes, requests);
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("scheduler: SPREAD levels the load, taking nodes in turn", "[actors][scheduler]") {
  std::vector<NodeView> nodes = {node(1, res(4)), node(2, res(4)), node(3, res(4)), node(4, res(4))};
  auto r = run(PlacementPolicy::spread, nodes, ones(8));
  REQUIRE(r.placements.size() == 8);
  CHECK(r.pending.empty());
  for (int i = 0; i < 4; ++i) CHECK(r.placements[i].node == node_id(i + 1));  // round-robin among equals
  for (const auto& [id, n] : count_by_node(r)) CHECK(n == 2);
  for (const auto& v : r.nodes) CHECK(v.used.cpus == 2);
}

TEST_CASE("scheduler: PACK fills one node before the next, leaving whole nodes free", "[actors][scheduler]") {
  std::vector<NodeView> nodes = {node(1, res(4)), node(2, res(4)), node(3, res(4)), node(4, res(4))};
  auto r = run(PlacementPolicy::pack, nodes, ones(6));
  auto counts = count_by_node(r);
  CHECK(counts[node_id(1)] == 4);
  CHECK(counts[node_id(2)] == 2);
  CHECK(counts.count(node_id(3)) == 0);
  CHECK(counts.count(node_id(4)) == 0);
}

TEST_CASE("scheduler: PACK picks the most-loaded node that fits, SPREAD the least-loaded", "[actors][scheduler]") {
  std::vector<NodeView> nodes = {node(1, res(4)), node(2, res(4)), node(3, res(4))};
  nodes[1].used = res(2);  // 50%
  nodes[2].used = res(4);  // full
  CHECK(run(PlacementPolicy::pack, nodes, ones(1)).placements.at(0).node == node_id(2));
  CHECK(run(PlacementPolicy::spread, nodes, ones(1)).placements.at(0).node == node_id(1));
  // Load is the critical (largest) utilisation: memory nearly full makes node 1 the most loaded.
  std::vector<NodeView> mem = {node(1, res(8, 0, 10 * kGiB)), node(2, res(8, 0, 10 * kGiB))};
  mem[0].used = res(1, 0, 9 * kGiB);
  mem[1].used = res(4, 0, 0);
  CHECK(run(PlacementPolicy::pack, mem, ones(1)).placements.at(0).node == node_id(1));
  CHECK(run(PlacementPolicy::spread, mem, ones(1)).placements.at(0).node == node_id(2));
}

TEST_CASE("scheduler: GPU demand goes to GPU nodes and CPU-only work keeps off them", "[actors][scheduler]") {
  std::vector<NodeView> nodes = {node(1, res(8)), node(2, res(8, 2))};
  for (PlacementPolicy policy : {PlacementPolicy::pack, PlacementPolicy::spread}) {
    INFO(placement_policy_name(policy));
    std::vector<PlacementRequest> reqs = {request(1, res(1, 1)), request(2, res(1)), request(3, res(1, 1)),
                                          request(4, res(1, 1))};
    auto r = run(policy, nodes, reqs);
    REQUIRE(r.placements.size() == 3);
    CHECK(r.placements[0].node == node_id(2));
    CHECK(r.placements[1].node == node_id(1));  // no GPU wanted: the CPU-only node, though B is loaded
    CHECK(r.placements[2].node == node_id(2));
    REQUIRE(r.pending.size() == 1);
    CHECK(r.pending[0].actor == actor_id(4));
    CHECK(r.pending[0].reason == "needs 1 gpu; none free on 2 alive nodes");
  }
  // CPU-only work does use a GPU node when nothing else fits.
  auto r = run(PlacementPolicy::pack, nodes, {request(1, res(8)), request(2, res(8))});
  CHECK(r.pending.empty());
  CHECK(r.placements.at(0).node == node_id(1));
  CHECK(r.placements.at(1).node == node_id(2));
}

TEST_CASE("scheduler: a demand larger than any node stays pending naming the largest free", "[actors][scheduler]") {
  std::vector<NodeView> nodes = {node(1, res(8, 1)), node(2, res(8, 1)), node(3, res(16, 0, 4 * kGiB))};
  nodes[0].used = res(0, 1);
  auto r = run(PlacementPolicy::spread, nodes,
               {request(1, res(1, 2)), request(2, res(20)), request(3, res(1, 0, 8 * kGiB)),
                request(4, res(10, 1))});
  REQUIRE(r.pending.size() == 4);
  CHECK(r.pending[0].reason == "needs 2 gpus; largest free on an alive node is 1 (node " + node_id(2).short_hex() + ")");
  CHECK(r.pending[1].reason == "needs 20 cpus; largest free on an alive node is 16 (node " + node_id(3).short_hex() + ")");
  CHECK(r.pending[2].reason == "needs 8.0 GiB memory; largest free on an alive node is 4.0 GiB memory (node " +
                                   node_id(3).short_hex() + ")");
  // Each kind fits somewhere, but not together.
  CHECK(r.pending[3].reason.find("needs 10 cpus, 1 gpu; no alive node has all of it free") == 0);
  for (const auto& v : r.nodes) CHECK(v.used.cpus == 0);
}

TEST_CASE("scheduler: SUSPECT and DEAD nodes are never chosen", "[actors][scheduler]") {
  std::vector<NodeView> nodes = {node(1, res(64), NodeState::dead), node(2, res(64), NodeState::suspect),
                                 node(3, res(2))};
  for (PlacementPolicy policy : {PlacementPolicy::pack, PlacementPolicy::spread}) {
    auto r = run(policy, nodes, ones(3));
    REQUIRE(r.placements.size() == 2);
    for (const auto& p : r.placements) CHECK(p.node == node_id(3));
    REQUIRE(r.pending.size() == 1);
    CHECK(r.pending[0].reason == "needs 1 cpu; none free on 1 alive node");
  }
  nodes[2].state = NodeState::dead;
  CHECK(run(PlacementPolicy::spread, nodes, ones(1)).pending.at(0).reason == "no alive node (1 SUSPECT, 2 DEAD)");
  CHECK(run(PlacementPolicy::spread, {}, ones(1)).pending.at(0).reason == "no node has joined the cluster");
}

TEST_CASE("scheduler: a pinned request goes to its node or says why not", "[actors][scheduler]") {
  std::vector<NodeView> nodes = {node(1, res(4)), node(2, res(4), NodeState::dead), node(3, res(1))};
  std::vector<PlacementRequest> reqs = {request(1, res(1)), request(2, res(1)), request(3, res(1)), request(4, res(2))};
  reqs[0].pinned_node = node_id(3);
  reqs[1].pinned_node = node_id(2);
  reqs[2].pinned_node = node_id(9);
  reqs[3].pinned_node = node_id(3);
  auto r = run(PlacementPolicy::pack, nodes, reqs);
  REQUIRE(r.placements.size() == 1);
  CHECK(r.placements[0].node == node_id(3));  // PACK alone would have chosen node 1
  REQUIRE(r.pending.size() == 3);
  CHECK(r.pending[0].reason == "pinned node " + node_id(2).short_hex() + " is DEAD");
  CHECK(r.pending[1].reason == "pinned node " + node_id(9).short_hex() + " is not in the cluster");
  CHECK(r.pending[2].reason == "needs 2 cpus; pinned node " + node_id(3).short_hex() + " has 0 cpus free");
}

TEST_CASE("scheduler: a request that avoids a node goes elsewhere or says that only that node has room",
          "[actors][scheduler]") {
  // PACK would choose node 1 (the most loaded that fits); avoiding it, node 2.
  std::vector<NodeView> nodes = {node(1, res(4)), node(2, res(4))};
  nodes[0].used = res(2);
  std::vector<PlacementRequest> reqs = {request(1, res(1))};
  reqs[0].avoid_node = node_id(1);
  auto r = run(PlacementPolicy::pack, nodes, reqs);
  REQUIRE(r.placements.size() == 1);
  CHECK(r.placements[0].node == node_id(2));
  // Only the avoided node has room: pending, saying so.
  nodes[1].used = res(4);
  r = run(PlacementPolicy::pack, nodes, reqs);
  REQUIRE(r.pending.size() == 1);
  CHECK(r.pending[0].reason == "needs 1 cpu on another node than node " + node_id(1).short_hex() +
                                   " (a restart --restart-on other), and only that one has it free");
}

TEST_CASE("scheduler: a gang is placed whole", "[actors][scheduler]") {
  std::vector<NodeView> nodes = {node(1, res(4, 2)), node(2, res(4, 2))};
  std::vector<PlacementRequest> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(request(i + 1, res(1, 1), "trainers"));
  auto r = run(PlacementPolicy::spread, nodes, reqs);
  CHECK(r.pending.empty());
  REQUIRE(r.placements.size() == 4);
  auto counts = count_by_node(r);
  CHECK(counts[node_id(1)] == 2);
  CHECK(counts[node_id(2)] == 2);
}

TEST_CASE("scheduler: a gang that does not fit places none and leaves the view as it was", "[actors][scheduler]") {
  std::vector<NodeView> nodes = {node(1, res(2)), node(2, res(2)), node(3, res(2))};
  std::vector<PlacementRequest> reqs = {request(100, res(1))};
  for (int i = 0; i < 8; ++i) reqs.push_back(request(i + 1, res(1), "trainers"));
  reqs.push_back(request(200, res(1)));
  for (PlacementPolicy policy : {PlacementPolicy::pack, PlacementPolicy::spread}) {
    auto r = run(policy, nodes, reqs);
    REQUIRE(r.placements.size() == 2);  // the two single requests, around the gang
    CHECK(r.placements[0].actor == actor_id(100));
    CHECK(r.placements[1].actor == actor_id(200));
    REQUIRE(r.pending.size() == 8);
    for (const auto& p : r.pending) {
      CHECK(p.group == "trainers");
      CHECK(p.reason == "gang 'trainers' of 8 needs 8 cpus; 5 free across 3 alive nodes");
    }
    double used = 0;
    for (const auto& v : r.nodes) used += v.used.cpus;
    CHECK(used == 2);
  }
}

TEST_CASE("scheduler: a gang that fits in sum but not in pieces names the member that failed", "[actors][scheduler]") {
  std::vector<NodeView> nodes = {node(1, res(3)), node(2, res(3))};
  std::vector<PlacementRequest> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back(request(i + 1, res(2), "ps"));
  auto r = run(PlacementPolicy::pack, nodes, reqs);
  CHECK(r.placements.empty());
  REQUIRE(r.pending.size() == 3);
  CHECK(r.pending[0].reason == "gang 'ps' of 3: member 3 (actor " + actor_id(3).short_hex() +
                                   ") fits nowhere once 2 are placed: needs 2 cpus; largest free on an alive node "
                                   "is 1 (node " + node_id(1).short_hex() + ")");
  for (const auto& v : r.nodes) CHECK(v.used.cpus == 0);
}

TEST_CASE("scheduler: results do not depend on the order nodes are listed in", "[actors][scheduler]") {
  std::vector<NodeView> nodes;
  for (uint32_t i = 1; i <= 20; ++i) nodes.push_back(node(i, res(i % 4 + 1, i % 3, (i % 5 + 1) * kGiB)));
  std::vector<PlacementRequest> reqs;
  for (uint32_t i = 1; i <= 60; ++i) reqs.push_back(request(i, res(i % 2 + 0.5, i % 7 == 0, (i % 3) * kGiB / 2)));
  for (PlacementPolicy policy : {PlacementPolicy::pack, PlacementPolicy::spread}) {
    auto a = run(policy, nodes, reqs);
    std::vector<NodeView> shuffled = nodes;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
    auto b = run(policy, shuffled, reqs);
    REQUIRE(a.placements.size() == b.placements.size());
    for (size_t i = 0; i < a.placements.size(); ++i) {
      CHECK(a.placements[i].actor == b.placements[i].actor);
      CHECK(a.placements[i].node == b.placements[i].node);
    }
    REQUIRE(a.pending.size() == b.pending.size());
    for (size_t i = 0; i < a.pending.size(); ++i) CHECK(a.pending[i].reason == b.pending[i].reason);
  }
}

TEST_CASE("scheduler: SPREAD takes turns across calls for work that needs nothing", "[actors][scheduler]") {
  std::vector<NodeView> nodes = {node(1, res(1)), node(2, res(1)), node(3, res(1))};
  Scheduler s({PlacementPolicy::spread});
  std::vector<NodeId> chosen;
  for (uint32_t i = 1; i <= 4; ++i) {
    auto r = s.schedule(nodes, {request(i, res(0))});
    REQUIRE(r.ok());
    chosen.push_back(r->placements.at(0).node);
  }
  CHECK(chosen == std::vector<NodeId>{node_id(1), node_id(2), node_id(3), node_id(1)});
}

TEST_CASE("scheduler: invalid demands are refused, placing nothing", "[actors][scheduler]") {
  std::vector<NodeView> nodes = {node(1, res(4))};
  Scheduler s;
  auto expect_invalid = [&](std::vector<PlacementRequest> reqs, const std::string& fragment) {
    auto r = s.schedule(nodes, reqs);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Code::invalid_argument);
    INFO(r.status().message());
    CHECK(r.status().message().find(fragment) != std::string::npos);
  };
  expect_invalid({request(1, res(1)), request(2, res(-1))}, "request 1 (actor " + actor_id(2).hex() + ") demands -1 cpus");
  expect_invalid({request(1, res(1, std::nan("")))}, "nan gpus");
  expect_invalid({request(1, res(std::numeric_limits<double>::infinity()))}, "inf cpus");
  expect_invalid({request(1, res(1, 0, -5))}, "-5 bytes of memory");
  expect_invalid({request(1, res(1)), request(1, res(1))}, "requested twice");
  PlacementRequest nil;
  expect_invalid({nil}, "nil actor id");
  auto dup = s.schedule({node(1, res(1)), node(1, res(2))}, ones(1));
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.status().message().find("appears twice") != std::string::npos);
}

TEST_CASE("scheduler: ten thousand requests over 100 nodes complete within capacity", "[actors][scheduler]") {
  std::vector<NodeView> nodes;
  for (uint32_t i = 1; i <= 100; ++i) nodes.push_back(node(i, res(64, i % 4 == 0 ? 8 : 0, 256 * kGiB)));
  std::vector<PlacementRequest> reqs;
  for (uint32_t i = 1; i <= 10000; ++i) {
    auto r = request(i, res(0.5 + (i % 3) * 0.25, i % 10 == 0 ? 1 : 0, (i % 4) * kGiB));
    if (i % 500 < 8) r.group = "gang" + std::to_string(i / 500);
    reqs.push_back(r);
  }
  for (PlacementPolicy policy : {PlacementPolicy::pack, PlacementPolicy::spread}) {
    auto r = run(policy, nodes, reqs);
    CHECK(r.placements.size() + r.pending.size() == reqs.size());
    CHECK(r.placements.size() > 5000);
    for (const auto& v : r.nodes) {
      CHECK(v.used.cpus <= v.total.cpus + 1e-6);
      CHECK(v.used.gpus <= v.total.gpus + 1e-6);
      CHECK(v.used.memory_bytes <= v.total.memory_bytes);
    }
  }
}

TEST_CASE("scheduler: policy names parse and node records become views", "[actors][scheduler]") {
  CHECK(parse_placement_policy("pack").value() == PlacementPolicy::pack);
  CHECK(parse_placement_policy("spread").value() == PlacementPolicy::spread);
  auto bad = parse_placement_policy("random");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "scheduler policy 'random' is not one of pack, spread");
  CHECK(describe_resources(res(2, 1, 4 * kGiB)) == "2 cpus, 1 gpu, 4.0 GiB memory");
  CHECK(describe_resources(res(0)) == "nothing");
  gcs::NodeRecord rec;
  rec.id = node_id(5);
  rec.state = NodeState::suspect;
  rec.total = res(8, 2);
  rec.used = res(1);
  auto views = node_views({rec});
  REQUIRE(views.size() == 1);
  CHECK(views[0].id == node_id(5));
  CHECK(views[0].state == NodeState::suspect);
  CHECK(views[0].total.gpus == 2);
  CHECK(views[0].used.cpus == 1);
}
