#include "actors/cluster_manager.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "gcs/events.h"
#include "gcs/in_memory_store.h"
#include "gcs/tables.h"
#include "tests/actors/actor_test_util.h"

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::testing;
using gcs::ActorState;
using gcs::NodeState;

namespace {

const std::string kToken = "s3cret-cluster-token";
const std::string kVersion = "0.1.0";

// A head over an in-memory GCS with a clock the test moves by hand.
struct Head {
  gcs::InMemoryStore store;
  int64_t now = 1'000'000;
  std::unique_ptr<ClusterManager> manager;

  Head() {
    ClusterManagerOptions o;
    o.cluster_token = kToken;
    o.version = kVersion;
    o.detector = {800, 2000};
    o.heartbeat_period_ms = 200;
    o.clock = [this] { return now; };
    auto m = ClusterManager::create(store, o);
    REQUIRE(m.ok());
    manager = std::move(*m);
  }

  gcs::NodeRecord node(uint32_t n) {
    auto r = gcs::Table<gcs::NodeRecord>(store).get(node_id(n).hex());
    REQUIRE(r.ok());
    return *r;
  }
  gcs::ActorRecord actor(uint32_t n) {
    auto r = gcs::Table<gcs::ActorRecord>(store).get(actor_id(n).hex());
    REQUIRE(r.ok());
    return *r;
  }
  void add_actor(uint32_t n, uint32_t on_node, ActorState state = ActorState::alive) {
    gcs::ActorRecord a;
    a.id = actor_id(n);
    a.type_name = "Trainer";
    a.node = node_id(on_node);
    a.state = state;
    REQUIRE(gcs::Table<gcs::ActorRecord>(store).put(a).ok());
  }
  std::vector<std::string> event_kinds() {
    auto events = gcs::recent_events(store, 1000);
    REQUIRE(events.ok());
    std::vector<std::string> kinds;
    for (const auto& e : *events) kinds.push_back(e.kind);
    return kinds;
  }
  TickReport tick() {
    auto r = manager->tick(now);
    REQUIRE(r.ok());
    return *r;
  }
};

gcs::NodeRecord new_node(uint32_t n) {
  gcs::NodeRecord r;
  r.id = node_id(n);
  r.address = "10.0.0." + std::to_string(n) + ":7000";
  r.hostname = "worker" + std::to_string(n);
  r.total = res(8, 1, 16 * kGiB);
  return r;
}

}  // namespace

TEST_CASE("cluster manager: a registered node is ALIVE and its joining is recorded", "[actors][cluster_manager]") {
  Head head;
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  gcs::NodeRecord n = head.node(1);
  CHECK(n.state == NodeState::alive);
  CHECK(n.last_heartbeat_ms == head.now);
  CHECK(n.started_ms == head.now);
  CHECK(n.version == kVersion);
  CHECK(n.total.cpus == 8);
  auto events = gcs::recent_events(head.store, 10);
  REQUIRE(events.ok());
  REQUIRE(events->size() == 1);
  CHECK(events->at(0).kind == "node_joined");
  CHECK(events->at(0).subject == node_id(1).hex());
  CHECK(events->at(0).message.find("worker1") != std::string::npos);
  CHECK(head.tick().transitions.empty());
}

TEST_CASE("cluster manager: a silent node is SUSPECT, then DEAD, and its actors die with it",
          "[actors][cluster_manager]") {
  Head head;
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  REQUIRE(head.manager->register_node(new_node(2), kToken, kVersion).ok());
  head.add_actor(10, 1);
  head.add_actor(11, 1, ActorState::restarting);
  head.add_actor(12, 2);
  const int64_t t0 = head.now;

  // Node 2 keeps beating; node 1 goes silent.
  auto step = [&](int64_t to) {
    while (head.now < to) {
      head.now += 200;
      REQUIRE(head.manager->heartbeat(node_id(2), res(1)).ok());
      head.tick();
    }
  };
  step(t0 + 600);
  CHECK(head.node(1).state == NodeState::alive);
  step(t0 + 800);
  CHECK(head.node(1).state == NodeState::suspect);
  CHECK(head.actor(10).state == ActorState::alive);  // SUSPECT alone kills nothing
  step(t0 + 1800);
  CHECK(head.node(1).state == NodeState::suspect);
  head.now = t0 + 2000;
  TickReport report = head.tick();
  REQUIRE(report.transitions.size() == 1);
  CHECK(report.transitions[0].to == NodeState::dead);
  CHECK(report.actors_marked_dead == 2);

  gcs::NodeRecord dead = head.node(1);
  CHECK(dead.state == NodeState::dead);
  CHECK(dead.death_reason == "no heartbeat for 2.0 s (timeout 2.0 s)");
  for (uint32_t a : {10u, 11u}) {
    gcs::ActorRecord r = head.actor(a);
    CHECK(r.state == ActorState::dead);
    CHECK(r.death_reason == "node " + node_id(1).short_hex() + " (worker1 10.0.0.1:7000) died: " + dead.death_reason);
    CHECK(r.updated_ms == head.now);
  }
  CHECK(head.actor(12).state == ActorState::alive);
  CHECK(head.node(2).state == NodeState::alive);
  // The node's death comes after its actors' (newest first in the overview), counting them.
  CHECK(head.event_kinds() ==
        std::vector<std::string>{"node_joined", "node_joined", "node_suspect", "actor_died", "actor_died", "node_died"});
  auto newest = gcs::recent_events(head.store, 1);
  REQUIRE(newest.ok());
  CHECK(newest->at(0).message == "node " + node_id(1).short_hex() + " (worker1 10.0.0.1:7000) died: " +
                                     dead.death_reason + " (2 actors on it marked dead)");

  // DEAD is final: later ticks change nothing, a heartbeat is refused, re-registering too.
  head.now += 10'000;
  REQUIRE(head.manager->heartbeat(node_id(2), res(1)).ok());
  CHECK(head.tick().transitions.empty());
  Status late = head.manager->heartbeat(node_id(1), res(0));
  CHECK(late.code() == Code::invalid_argument);
  CHECK(late.message().find("declared DEAD") != std::string::npos);
  Status again = head.manager->register_node(new_node(1), kToken, kVersion);
  CHECK(again.code() == Code::invalid_argument);
  CHECK(again.message().find("new id") != std::string::npos);
  CHECK(head.node(1).state == NodeState::dead);
}

TEST_CASE("cluster manager: a heartbeat brings a SUSPECT node back at the next tick", "[actors][cluster_manager]") {
  Head head;
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  head.now += 900;
  REQUIRE(head.tick().transitions.size() == 1);
  REQUIRE(head.node(1).state == NodeState::suspect);
  head.now += 100;
  REQUIRE(head.manager->heartbeat(node_id(1), res(3, 1, kGiB)).ok());
  CHECK(head.node(1).state == NodeState::suspect);  // taken in memory; the tick writes it
  TickReport back = head.tick();
  REQUIRE(back.transitions.size() == 1);
  CHECK(back.transitions[0].to == NodeState::alive);
  gcs::NodeRecord n = head.node(1);
  CHECK(n.state == NodeState::alive);
  CHECK(n.last_heartbeat_ms == head.now);
  CHECK(n.used.cpus == 3);
  CHECK(n.used.memory_bytes == kGiB);
  CHECK(head.event_kinds().back() == "node_recovered");
  auto events = gcs::recent_events(head.store, 1);
  REQUIRE(events.ok());
  CHECK(events->at(0).message == "node " + node_id(1).short_hex() +
                                     " (worker1 10.0.0.1:7000) is ALIVE: heartbeat resumed after 1.0 s of silence");
  CHECK(head.tick().transitions.empty());
}

TEST_CASE("cluster manager: a lost connection kills the node and its actors at once", "[actors][cluster_manager]") {
  Head head;
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  head.add_actor(10, 1);
  REQUIRE(head.manager->on_connection_lost(node_id(1)).ok());
  CHECK(head.node(1).state == NodeState::dead);
  CHECK(head.node(1).death_reason == "connection to node lost");
  CHECK(head.actor(10).state == ActorState::dead);
  CHECK(head.actor(10).death_reason.find("connection to node lost") != std::string::npos);
  REQUIRE(head.manager->on_connection_lost(node_id(1)).ok());  // again: nothing more happens
  CHECK(head.event_kinds() == std::vector<std::string>{"node_joined", "actor_died", "node_died"});
  CHECK(head.manager->on_connection_lost(node_id(9)).code() == Code::not_found);
}

TEST_CASE("cluster manager: a wrong token is refused without revealing the right one", "[actors][cluster_manager]") {
  Head head;
  for (const std::string& wrong : {std::string("guess"), std::string(""), kToken + "x", kToken.substr(1)}) {
    Status st = head.manager->register_node(new_node(1), wrong, kVersion);
    CHECK(st.code() == Code::invalid_argument);
    CHECK(st.message().find("wrong cluster token") != std::string::npos);
    CHECK(st.message().find(kToken) == std::string::npos);
  }
  auto nodes = gcs::Table<gcs::NodeRecord>(head.store).list();
  REQUIRE(nodes.ok());
  CHECK(nodes->empty());
}

TEST_CASE("cluster manager: a node of another troupe version is refused naming both", "[actors][cluster_manager]") {
  Head head;
  Status st = head.manager->register_node(new_node(1), kToken, "0.2.0");
  CHECK(st.code() == Code::version_mismatch);
  CHECK(st.message().find("0.2.0") != std::string::npos);
  CHECK(st.message().find("0.1.0") != std::string::npos);
  CHECK(gcs::Table<gcs::NodeRecord>(head.store).get(node_id(1).hex()).status().code() == Code::not_found);
}

TEST_CASE("cluster manager: bad registrations and unknown heartbeats are refused", "[actors][cluster_manager]") {
  Head head;
  CHECK(head.manager->register_node(gcs::NodeRecord{}, kToken, kVersion).code() == Code::invalid_argument);
  gcs::NodeRecord bad = new_node(1);
  bad.total.cpus = -1;
  CHECK(head.manager->register_node(bad, kToken, kVersion).code() == Code::invalid_argument);
  Status unknown = head.manager->heartbeat(node_id(7), res(1));
  CHECK(unknown.code() == Code::not_found);
  CHECK(unknown.message().find("register") != std::string::npos);
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  CHECK(head.manager->heartbeat(node_id(1), res(std::nan(""))).code() == Code::invalid_argument);
}

TEST_CASE("cluster manager: a store that is down fails the tick, which works again after",
          "[actors][cluster_manager]") {
  Head head;
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  head.add_actor(10, 1);
  head.store.set_down(true);
  head.now += 5'000;
  auto down = head.manager->tick(head.now);
  REQUIRE_FALSE(down.ok());
  CHECK(down.status().code() == Code::unavailable);
  CHECK(down.status().message().find("nodes table") != std::string::npos);
  // Heartbeats never wait on the store: taken from memory during the outage.
  CHECK(head.manager->heartbeat(node_id(1), res(1)).ok());
  CHECK(head.manager->register_node(new_node(2), kToken, kVersion).code() == Code::unavailable);
  head.store.set_down(false);
  // Heartbeats could not be recorded during the outage: the node gets a full timeout from the
  // recovery before it is suspected, instead of being declared DEAD for the store's silence.
  TickReport report = head.tick();
  CHECK(report.transitions.empty());
  CHECK(head.actor(10).state == ActorState::alive);
  head.now += 1'999;
  CHECK(head.tick().transitions.empty());
  // Still silent a full timeout after the recovery: now it is DEAD, with its actors.
  head.now += 1;
  report = head.tick();
  REQUIRE(report.transitions.size() == 1);
  CHECK(report.transitions[0].to == NodeState::dead);
  CHECK(head.actor(10).state == ActorState::dead);
}

TEST_CASE("cluster manager: a node that heartbeats after a store outage stays ALIVE",
          "[actors][cluster_manager]") {
  Head head;
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  head.store.set_down(true);
  head.now += 10'000;
  REQUIRE_FALSE(head.manager->tick(head.now).ok());
  head.store.set_down(false);
  CHECK(head.tick().transitions.empty());
  head.now += 1'600;
  REQUIRE(head.manager->heartbeat(node_id(1), res(1)).ok());
  head.now += 700;  // past the grace, but 0.7 s after the heartbeat: not even SUSPECT
  CHECK(head.tick().transitions.empty());
  CHECK(head.node(1).state == NodeState::alive);
}

TEST_CASE("cluster manager: a new head marks the actors a previous one left on DEAD nodes",
          "[actors][cluster_manager]") {
  Head head;
  gcs::NodeRecord dead = new_node(1);
  dead.state = NodeState::dead;
  dead.death_reason = "connection to node lost";
  REQUIRE(gcs::Table<gcs::NodeRecord>(head.store).put(dead).ok());
  head.add_actor(10, 1);
  TickReport report = head.tick();
  CHECK(report.transitions.empty());
  CHECK(report.actors_marked_dead == 1);
  CHECK(head.actor(10).state == ActorState::dead);
  CHECK(head.tick().actors_marked_dead == 0);
}

TEST_CASE("cluster manager: a restarted head times its predecessor's nodes from its own start",
          "[actors][cluster_manager]") {
  Head head;  // the first head: node 1 joins, then the head dies (nothing ticks for 10 s)
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  head.now += 10'000;
  ClusterManagerOptions o;
  o.cluster_token = kToken;
  o.version = kVersion;
  o.detector = {800, 2000};
  o.heartbeat_period_ms = 200;
  o.clock = [&head] { return head.now; };
  auto second = ClusterManager::create(head.store, o);  // the restarted head, same GCS
  REQUIRE(second.ok());
  // Its first tick does not kill the node for its 10 s of silence: the node had no head to beat to.
  CHECK((*second)->tick(head.now)->transitions.empty());
  CHECK(head.node(1).state == NodeState::alive);
  // The node registers again (same id) and beats: it stays ALIVE.
  head.now += 300;
  REQUIRE((*second)->register_node(new_node(1), kToken, kVersion).ok());
  head.now += 200;
  REQUIRE((*second)->heartbeat(node_id(1), res(0)).ok());
  CHECK((*second)->tick(head.now)->transitions.empty());
  CHECK(head.node(1).state == NodeState::alive);
  // A node that never comes back is timed from the restarted head's start: DEAD 2 s after it.
  gcs::NodeRecord gone = new_node(2);
  gone.last_heartbeat_ms = head.now - 60'000;
  REQUIRE(gcs::Table<gcs::NodeRecord>(head.store).put(gone).ok());
  auto third = ClusterManager::create(head.store, o);
  REQUIRE(third.ok());
  const int64_t started = head.now;
  CHECK((*third)->tick(head.now)->transitions.empty());
  head.now = started + 900;
  CHECK((*third)->tick(head.now)->transitions.size() >= 1);  // node 2 (and the silent node 1) SUSPECT
  CHECK(head.node(2).state == NodeState::suspect);
  head.now = started + 2000;
  (void)(*third)->tick(head.now);
  CHECK(head.node(2).state == NodeState::dead);
}

TEST_CASE("cluster manager: a tick whose GCS read waited out a restart grants every node a full timeout",
          "[actors][cluster_manager]") {
  Head head;
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  // The read inside the tick takes 3.5 s (the client reconnecting to a restarted redis-server):
  // the clock jumps while the tick runs. No heartbeat could be taken meanwhile.
  ClusterManagerOptions o;
  o.cluster_token = kToken;
  o.version = kVersion;
  o.detector = {800, 2000};
  o.heartbeat_period_ms = 200;
  bool slow = false;
  o.clock = [&] {
    const int64_t t = head.now;
    if (slow) head.now += 3500;  // the reading after this one comes 3.5 s later
    slow = false;
    return t;
  };
  auto m = ClusterManager::create(head.store, o);
  REQUIRE(m.ok());
  REQUIRE((*m)->heartbeat(node_id(1), res(0)).ok());
  const int64_t t0 = head.now;
  slow = true;  // the next clock reading (the tick's entry) is followed by a 3.5 s wait
  auto report = (*m)->tick(t0);  // its time was taken before the read stalled
  REQUIRE(report.ok());
  CHECK(report->transitions.empty());
  CHECK(head.node(1).state == NodeState::alive);
  // Then heartbeats flow again; a node that stays silent is DEAD 2 s after the stall, not before.
  head.now = t0 + 3500 + 1900;
  CHECK((*m)->tick(head.now)->transitions.empty());
  head.now = t0 + 3500 + 2100;
  (void)(*m)->tick(head.now);
  CHECK(head.node(1).state == NodeState::dead);
}

TEST_CASE("cluster manager: the next tick falls on the next timeout", "[actors][cluster_manager]") {
  Head head;
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  const int64_t t0 = head.now;
  CHECK(head.tick().next_tick_ms == t0 + 200);  // a heartbeat period when nothing is due sooner
  head.now = t0 + 1'900;
  CHECK(head.tick().next_tick_ms == t0 + 2'000);  // exactly when node 1 would be DEAD
}

TEST_CASE("cluster manager: options are checked", "[actors][cluster_manager]") {
  gcs::InMemoryStore store;
  ClusterManagerOptions o = ClusterManagerOptions::from_config(Config{}, "token");
  CHECK(o.validate().ok());
  CHECK(o.heartbeat_period_ms == 200);
  CHECK(o.detector.dead_after_ms == 2000);
  CHECK_FALSE(o.version.empty());
  ClusterManagerOptions no_token = o;
  no_token.cluster_token.clear();
  CHECK(ClusterManager::create(store, no_token).status().code() == Code::invalid_argument);
  ClusterManagerOptions slow = o;
  slow.heartbeat_period_ms = 800;
  auto refused = ClusterManager::create(store, slow);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("heartbeat_period_ms") != std::string::npos);
}

TEST_CASE("cluster manager: while the head service takes no heartbeats (busy) no node is suspected",
          "[actors][cluster_manager]") {
  gcs::InMemoryStore store;
  int64_t now = 1'000'000;
  ClusterManagerOptions o;
  o.cluster_token = kToken;
  o.version = kVersion;
  o.detector = {800, 2000};
  o.heartbeat_period_ms = 200;
  o.clock = [&] { return now; };
  o.self = node_id(9);  // the head
  auto created = ClusterManager::create(store, o);
  REQUIRE(created.ok());
  ClusterManager& m = **created;
  REQUIRE(m.register_node(new_node(9), kToken, kVersion).ok());
  REQUIRE(m.register_node(new_node(1), kToken, kVersion).ok());
  auto state = [&](uint32_t n) {
    auto r = gcs::Table<gcs::NodeRecord>(store).get(node_id(n).hex());
    REQUIRE(r.ok());
    return r->state;
  };
  auto tick = [&] {
    auto r = m.tick(now);
    REQUIRE(r.ok());
    return *r;
  };
  REQUIRE(m.heartbeat(node_id(9), res(0)).ok());
  REQUIRE(m.heartbeat(node_id(1), res(0)).ok());
  // The service blocks for 5 s: neither the head's own heartbeat nor node 1's is taken.
  for (int i = 0; i < 25; ++i) {
    now += 200;
    CHECK(tick().transitions.empty());
  }
  CHECK(state(1) == NodeState::alive);
  // It takes them again (node 1's waited in its mailbox): nobody is suspected.
  REQUIRE(m.heartbeat(node_id(9), res(0)).ok());
  REQUIRE(m.heartbeat(node_id(1), res(0)).ok());
  CHECK(tick().transitions.empty());
  // A node really silent from then on is suspected and declared dead as usual, after the grace.
  for (int i = 0; i < 15; ++i) {
    now += 200;
    REQUIRE(m.heartbeat(node_id(9), res(0)).ok());
    tick();
  }
  CHECK(state(1) == NodeState::dead);
  CHECK(state(9) == NodeState::alive);
}

TEST_CASE("cluster manager: heartbeats are answered from memory through a GCS outage and written when it ends",
          "[actors][cluster_manager]") {
  Head head;
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  REQUIRE(head.manager->register_node(new_node(2), kToken, kVersion).ok());
  head.add_actor(10, 1);
  const int64_t t0 = head.now;
  head.store.set_down(true);
  // 60 s without a GCS: node 1 beats every 200 ms (every beat answered), node 2 falls silent.
  int failed_ticks = 0;
  for (head.now = t0 + 200; head.now <= t0 + 60'000; head.now += 200) {
    REQUIRE(head.manager->heartbeat(node_id(1), res(2)).ok());
    failed_ticks += !head.manager->tick(head.now).ok();
  }
  CHECK(failed_ticks == 300);
  // Refusals still come from memory: an unknown node, a DEAD one (none here), bad resources.
  CHECK(head.manager->heartbeat(node_id(7), res(1)).code() == Code::not_found);
  CHECK(head.manager->heartbeat(node_id(1), res(-1)).code() == Code::invalid_argument);
  head.store.set_down(false);
  const int64_t back = head.now;
  REQUIRE(head.manager->heartbeat(node_id(1), res(2)).ok());
  CHECK(head.tick().transitions.empty());
  gcs::NodeRecord n1 = head.node(1);  // the newest heartbeat and its resources, written at once
  CHECK(n1.state == NodeState::alive);
  CHECK(n1.last_heartbeat_ms == back);
  CHECK(n1.used.cpus == 2);
  CHECK(head.node(2).last_heartbeat_ms == t0);  // nothing heard: nothing written
  // Node 2, silent all along, gets the full timeout after the outage (it may have been unable to
  // reach a head stalled on the store), then is DEAD; node 1, beating, stays.
  while (head.now < back + 2'000) {
    head.now += 200;
    REQUIRE(head.manager->heartbeat(node_id(1), res(2)).ok());
    head.tick();
  }
  CHECK(head.node(1).state == NodeState::alive);
  CHECK(head.node(2).state == NodeState::dead);
  CHECK(head.actor(10).state == ActorState::alive);  // node 1's actor, kept through it all
}

TEST_CASE("cluster manager: heartbeats without resources record those the head service noted",
          "[actors][cluster_manager]") {
  Head head;
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  head.manager->note_used({{node_id(1), res(3, 1, kGiB)}, {node_id(5), res(1)}});  // 5: unknown, ignored
  head.now += 200;
  REQUIRE(head.manager->heartbeat(node_id(1)).ok());
  head.tick();
  CHECK(head.node(1).used.cpus == 3);
  CHECK(head.node(1).used.gpus == 1);
  CHECK(head.node(1).last_heartbeat_ms == head.now);
  CHECK(gcs::Table<gcs::NodeRecord>(head.store).get(node_id(5).hex()).status().code() == Code::not_found);
  CHECK(head.manager->heartbeat(node_id(5)).code() == Code::not_found);
}

TEST_CASE("cluster manager: a head that did not run for a while suspects nobody for its own silence",
          "[actors][cluster_manager]") {
  gcs::InMemoryStore store;
  int64_t now = 1'000'000;
  int64_t ran = 5'000;  // the head's monotonic clock
  ClusterManagerOptions o;
  o.cluster_token = kToken;
  o.version = kVersion;
  o.detector = {800, 2000};
  o.heartbeat_period_ms = 200;
  o.clock = [&] { return now; };
  o.monotonic = [&] { return ran; };
  auto created = ClusterManager::create(store, o);
  REQUIRE(created.ok());
  ClusterManager& m = **created;
  REQUIRE(m.register_node(new_node(1), kToken, kVersion).ok());
  REQUIRE(m.register_node(new_node(2), kToken, kVersion).ok());
  auto state = [&](uint32_t n) { return gcs::Table<gcs::NodeRecord>(store).get(node_id(n).hex())->state; };
  REQUIRE(m.tick(now).ok());
  // SIGSTOP for 30 s: no tick ran, no heartbeat was taken (they wait in the nodes' retries).
  now += 30'000;
  ran += 30'000;
  auto first = m.tick(now);
  REQUIRE(first.ok());
  CHECK(first->transitions.empty());
  // Node 1 beats again; node 2 really is gone: DEAD a full timeout after the head came back.
  for (int i = 0; i < 9; ++i) {
    now += 200;
    ran += 200;
    REQUIRE(m.heartbeat(node_id(1), res(0)).ok());
    REQUIRE(m.tick(now).ok());
  }
  CHECK(state(2) != NodeState::dead);
  now += 200;
  ran += 200;
  REQUIRE(m.heartbeat(node_id(1), res(0)).ok());
  REQUIRE(m.tick(now).ok());
  CHECK(state(1) == NodeState::alive);
  CHECK(state(2) == NodeState::dead);
}

TEST_CASE("cluster manager: a GCS that comes back empty gets its live nodes written again, not its dead ones",
          "[actors][cluster_manager]") {
  Head head;
  REQUIRE(head.manager->register_node(new_node(1), kToken, kVersion).ok());
  REQUIRE(head.manager->register_node(new_node(2), kToken, kVersion).ok());
  REQUIRE(head.manager->register_node(new_node(3), kToken, kVersion).ok());
  REQUIRE(head.manager->on_connection_lost(node_id(3)).ok());
  head.now += 200;
  REQUIRE(head.manager->heartbeat(node_id(1), res(1)).ok());
  REQUIRE(head.manager->heartbeat(node_id(2), res(2)).ok());
  head.tick();
  // Its data lost: the nodes table is empty (the actors and events too, gone with it).
  for (uint32_t n : {1u, 2u, 3u}) REQUIRE(head.store.remove("nodes", node_id(n).hex()).ok());
  head.now += 200;
  REQUIRE(head.manager->heartbeat(node_id(1), res(1)).ok());
  CHECK(head.tick().transitions.empty());
  gcs::NodeRecord n1 = head.node(1);
  CHECK(n1.state == NodeState::alive);
  CHECK(n1.address == "10.0.0.1:7000");
  CHECK(n1.total.cpus == 8);
  CHECK(n1.last_heartbeat_ms == head.now);
  CHECK(head.node(2).used.cpus == 2);
  CHECK(gcs::Table<gcs::NodeRecord>(head.store).get(node_id(3).hex()).status().code() == Code::not_found);
  auto events = gcs::recent_events(head.store, 1);
  REQUIRE(events.ok());
  CHECK(events->at(0).kind == "gcs_refilled");
  CHECK(events->at(0).message.find("2 live node records") != std::string::npos);
  // The dead one stays refused.
  CHECK(head.manager->heartbeat(node_id(3), res(0)).code() == Code::invalid_argument);
  CHECK(head.tick().transitions.empty());
  CHECK(head.event_kinds().back() == "gcs_refilled");  // once: the table is whole again
}
