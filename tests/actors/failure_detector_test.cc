#include "actors/failure_detector.h"

#include <catch2/catch.hpp>

#include "tests/actors/actor_test_util.h"

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::testing;
using gcs::NodeState;

namespace {

gcs::NodeRecord node_record(uint32_t n, NodeState state, int64_t last_heartbeat_ms) {
  gcs::NodeRecord r;
  r.id = node_id(n);
  r.state = state;
  r.last_heartbeat_ms = last_heartbeat_ms;
  return r;
}

}  // namespace

TEST_CASE("failure detector: silence makes a node SUSPECT, then DEAD", "[actors][failure_detector]") {
  FailureDetector fd({800, 2000});
  gcs::NodeRecord n = node_record(1, NodeState::alive, 10'000);
  CHECK_FALSE(fd.evaluate(n, 10'000).has_value());
  CHECK_FALSE(fd.evaluate(n, 10'799).has_value());

  auto suspect = fd.evaluate(n, 10'900);
  REQUIRE(suspect);
  CHECK(suspect->node == n.id);
  CHECK(suspect->from == NodeState::alive);
  CHECK(suspect->to == NodeState::suspect);
  CHECK(suspect->reason == "no heartbeat for 0.9 s (suspect after 0.8 s)");

  n.state = NodeState::suspect;
  CHECK_FALSE(fd.evaluate(n, 11'999).has_value());  // still SUSPECT: nothing new to say
  auto dead = fd.evaluate(n, 12'100);
  REQUIRE(dead);
  CHECK(dead->from == NodeState::suspect);
  CHECK(dead->to == NodeState::dead);
  CHECK(dead->reason == "no heartbeat for 2.1 s (timeout 2.0 s)");
}

TEST_CASE("failure detector: an ALIVE node checked late goes straight to DEAD", "[actors][failure_detector]") {
  FailureDetector fd({800, 2000});
  auto t = fd.evaluate(node_record(1, NodeState::alive, 0), 5'000);
  REQUIRE(t);
  CHECK(t->from == NodeState::alive);
  CHECK(t->to == NodeState::dead);
  CHECK(t->reason == "no heartbeat for 5.0 s (timeout 2.0 s)");
}

TEST_CASE("failure detector: a heartbeat brings a SUSPECT node back", "[actors][failure_detector]") {
  FailureDetector fd({800, 2000});
  auto t = fd.evaluate(node_record(1, NodeState::suspect, 1'500), 1'600);
  REQUIRE(t);
  CHECK(t->from == NodeState::suspect);
  CHECK(t->to == NodeState::alive);
  CHECK(t->reason == "heartbeat resumed (last 0.1 s ago)");
  // A heartbeat stamped after `now` (clocks a little apart) counts as fresh.
  auto future = fd.evaluate(node_record(1, NodeState::suspect, 2'000), 1'000);
  REQUIRE(future);
  CHECK(future->to == NodeState::alive);
}

TEST_CASE("failure detector: DEAD is final", "[actors][failure_detector]") {
  FailureDetector fd({800, 2000});
  gcs::NodeRecord n = node_record(1, NodeState::dead, 1'000);
  CHECK_FALSE(fd.evaluate(n, 1'000).has_value());   // even with a fresh heartbeat
  CHECK_FALSE(fd.evaluate(n, 99'000).has_value());
  CHECK_FALSE(fd.connection_lost(n).has_value());
}

TEST_CASE("failure detector: a lost connection is DEAD at once", "[actors][failure_detector]") {
  FailureDetector fd({800, 2000});
  for (NodeState from : {NodeState::alive, NodeState::suspect}) {
    auto t = fd.connection_lost(node_record(1, from, 1'000));
    REQUIRE(t);
    CHECK(t->from == from);
    CHECK(t->to == NodeState::dead);
    CHECK(t->reason == "connection to node lost");
  }
}

TEST_CASE("failure detector: evaluates a whole table and says when to look again", "[actors][failure_detector]") {
  FailureDetector fd({800, 2000});
  std::vector<gcs::NodeRecord> nodes = {node_record(1, NodeState::alive, 1'000),
                                        node_record(2, NodeState::alive, 500),
                                        node_record(3, NodeState::dead, 0),
                                        node_record(4, NodeState::suspect, 500)};
  auto ts = fd.evaluate(nodes, 1'400);
  REQUIRE(ts.size() == 1);
  CHECK(ts[0].node == node_id(2));
  CHECK(ts[0].to == NodeState::suspect);
  // Node 1 turns SUSPECT at 1800; that is the earliest due time (the DEAD node has none).
  CHECK(fd.next_due_ms(nodes, 1'400).value() == 1'800);
  CHECK_FALSE(fd.next_due_ms({node_record(3, NodeState::dead, 0)}, 1'400).has_value());
  // With defaults, a node is DEAD 2.0 s after its last heartbeat when checked at the due times.
  gcs::NodeRecord n = node_record(5, NodeState::alive, 0);
  int64_t now = 0;
  while (auto due = fd.next_due_ms({n}, now)) {
    now = *due;
    if (auto t = fd.evaluate(n, now)) n.state = t->to;
  }
  CHECK(n.state == NodeState::dead);
  CHECK(now == 2'000);
}

TEST_CASE("failure detector: settings are checked", "[actors][failure_detector]") {
  CHECK(FailureDetectorOptions{800, 2000}.validate().ok());
  for (auto bad : {FailureDetectorOptions{0, 2000}, FailureDetectorOptions{2000, 2000}, FailureDetectorOptions{900, 800}}) {
    Status st = bad.validate();
    CHECK(st.code() == Code::invalid_argument);
    CHECK(st.message().find("node_suspect_after_ms") != std::string::npos);
  }
  Config defaults;
  auto o = FailureDetectorOptions::from_config(defaults);
  CHECK(o.suspect_after_ms == 800);
  CHECK(o.dead_after_ms == 2000);
  CHECK(o.validate().ok());
  CHECK(defaults.heartbeat_period_ms < o.suspect_after_ms);
}
