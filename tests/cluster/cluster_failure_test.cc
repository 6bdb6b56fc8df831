// Failures under a running cluster: a node process killed with SIGKILL (detected within the
// documented bound, its actors marked dead) and the GCS's redis-server frozen, then killed and
// started again by the head's watchdog (the cluster rides both out: no process crashes, no node is
// declared dead, no record is lost).
#include <catch2/catch.hpp>

#include <signal.h>

#include <cstdlib>
#include <thread>

#include "tests/cluster/cluster_fixture.h"

using namespace troupe::testing;

namespace {

// The node entry whose process has this pid (all nodes run on this machine).
Json node_with_pid(const Json& view, pid_t pid) {
  for (const Json& n : view.at("nodes")) {
    if (n.at("pid").get<int64_t>() == pid) return n;
  }
  return Json();
}

Json find_node(const Json& view, const std::string& id) {
  for (const Json& n : view.at("nodes")) {
    if (n.at("id") == id) return n;
  }
  return Json();
}

}  // namespace

TEST_CASE("a node killed with SIGKILL is DEAD within the bound and so are its actors", "[cluster]") {
  ClusterFixture c;
  c.up("--nodes 3 --cpus 2");
  auto spawn = c.troupe("spawn echo --count 40 --policy spread --json", 60);
  INFO(spawn.both());
  REQUIRE(spawn.exit_code == 0);
  REQUIRE(Json::parse(spawn.last_line()).at("started") == 40);

  const pid_t victim_pid = c.pid_of("node-2");
  REQUIRE(victim_pid > 0);
  Json view = c.status();
  const Json victim = node_with_pid(view, victim_pid);
  INFO(view.at("nodes").dump(2));
  REQUIRE(!victim.is_null());
  const std::string victim_id = victim.at("id");
  REQUIRE(victim.at("state") == "ALIVE");

  // Spread placement put actors on the victim and on the others.
  std::set<std::string> on_victim, elsewhere;
  for (const Json& a : view.at("actors")) {
    REQUIRE(a.at("state") == "ALIVE");
    (a.at("node") == victim_id ? on_victim : elsewhere).insert(a.at("id").get<std::string>());
  }
  REQUIRE(!on_victim.empty());
  REQUIRE(!elsewhere.empty());

  const auto killed_at = Clock::now();
  REQUIRE(::kill(victim_pid, SIGKILL) == 0);
  const bool dead = poll_until(
      [&] {
        view = c.status();
        return find_node(view, victim_id).at("state") == "DEAD";
      },
      kNodeDeadAfter + kDetectionSlack, std::chrono::milliseconds(50));
  const auto detected_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed_at).count();
  INFO("node " << victim_id << " after " << detected_ms << " ms: " << find_node(view, victim_id).dump()
               << c.logs_tail());
  REQUIRE(dead);
  CHECK(process_gone(victim_pid));
  CHECK(!find_node(view, victim_id).at("death_reason").get<std::string>().empty());

  // The other three nodes did not suffer for it.
  for (const Json& n : view.at("nodes")) {
    if (n.at("id") != victim_id) CHECK(n.at("state") == "ALIVE");
  }

  // Every actor of the dead node is DEAD, naming the node; every other actor is still ALIVE. The
  // sweep is written with the node's death, but poll in case the view caught it half-way.
  const std::string victim_short = victim_id.substr(0, 8);
  poll_until(
      [&] {
        view = c.status(1000);
        for (const Json& a : view.at("actors")) {
          if (on_victim.count(a.at("id").get<std::string>()) && a.at("state") != "DEAD") return false;
        }
        return true;
      },
      std::chrono::seconds(5));
  for (const Json& a : view.at("actors")) {
    INFO("actor " << a.dump());
    if (on_victim.count(a.at("id").get<std::string>())) {
      CHECK(a.at("state") == "DEAD");
      CHECK(a.at("death_reason").get<std::string>().find(victim_short) != std::string::npos);
    } else {
      CHECK(a.at("state") == "ALIVE");
    }
  }

  // The event log records the node's death, naming it.
  bool node_died_event = false;
  for (const Json& e : view.at("events")) {
    if (e.at("kind") == "node_died" && e.at("subject") == victim_id) {
      node_died_event = true;
      CHECK(e.at("message").get<std::string>().find(victim_short) != std::string::npos);
    }
  }
  INFO(view.at("events").dump(2));
  CHECK(node_died_event);

  // The survivors still answer; the dead ones are no longer called.
  auto call = c.troupe("call --all --json", 120);
  INFO(call.both());
  CHECK(call.exit_code == 0);
  Json called = Json::parse(call.last_line());
  CHECK(called.at("total") == elsewhere.size());
  CHECK(called.at("answered") == elsewhere.size());
}

TEST_CASE("a frozen node (SIGSTOP) is DEAD within node_dead_after_ms through missed heartbeats", "[cluster]") {
  // A killed process closes its connections, which the head notices at once; a frozen one keeps
  // them open, so only the heartbeat deadline can find it: this checks the documented bound itself.
  ClusterFixture c;
  c.up("--nodes 2 --cpus 1");
  const pid_t frozen_pid = c.pid_of("node-1");
  REQUIRE(frozen_pid > 0);
  Json view = c.status();
  const Json frozen = node_with_pid(view, frozen_pid);
  REQUIRE(!frozen.is_null());
  const std::string frozen_id = frozen.at("id");

  struct Thaw {  // a stopped process would ignore `troupe down`'s SIGTERM: resume it in all cases
    pid_t pid;
    ~Thaw() { ::kill(pid, SIGCONT); }
  } thaw{frozen_pid};
  const auto frozen_at = Clock::now();
  REQUIRE(::kill(frozen_pid, SIGSTOP) == 0);
  const bool dead = poll_until(
      [&] {
        view = c.status();
        return find_node(view, frozen_id).at("state") == "DEAD";
      },
      kNodeDeadAfter + kDetectionSlack, std::chrono::milliseconds(50));
  const auto detected_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - frozen_at).count();
  INFO("node " << frozen_id << " after " << detected_ms << " ms: " << find_node(view, frozen_id).dump()
               << c.logs_tail());
  REQUIRE(dead);
  for (const Json& n : view.at("nodes")) {
    if (n.at("id") != frozen_id) CHECK(n.at("state") == "ALIVE");
  }
}

TEST_CASE("a spawn that waits on a frozen node does not make the head declare the others dead", "[cluster]") {
  // The head service asks a node manager to spawn with a blocking call (up to its 10 s node
  // timeout), and every node's heartbeat waits in the service's mailbox meanwhile. The failure
  // detector sees the head's own heartbeat overdue too and suspects nobody until the service takes
  // heartbeats again (actors/cluster_manager.h): the healthy node must stay ALIVE throughout.
  // Wider detector bounds (3 s / 4 s, still far below the stall) leave time to spawn on the frozen
  // node before the head suspects it.
  ::setenv("TROUPE_NODE_SUSPECT_AFTER_MS", "3000", 1);
  ::setenv("TROUPE_NODE_DEAD_AFTER_MS", "4000", 1);
  ClusterFixture c;
  c.up("--nodes 2 --cpus 1");
  ::unsetenv("TROUPE_NODE_SUSPECT_AFTER_MS");
  ::unsetenv("TROUPE_NODE_DEAD_AFTER_MS");
  const pid_t frozen_pid = c.pid_of("node-1");
  REQUIRE(frozen_pid > 0);
  Json view = c.status();
  const std::string frozen_id = node_with_pid(view, frozen_pid).at("id");
  std::vector<std::string> healthy;
  for (const Json& n : view.at("nodes"))
    if (n.at("id") != frozen_id) healthy.push_back(n.at("id"));
  REQUIRE(healthy.size() == 2);  // the head and node-2

  struct Thaw {
    pid_t pid;
    ~Thaw() { ::kill(pid, SIGCONT); }
  } thaw{frozen_pid};
  REQUIRE(::kill(frozen_pid, SIGSTOP) == 0);
  const auto frozen_at = Clock::now();
  CommandResult spawned;
  int64_t spawn_ms = 0;  // how long the spawn took
  std::thread spawner([&] {
    spawned = c.troupe("spawn counter --node " + frozen_id + " --json", 60);
    spawn_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - frozen_at).count();
  });
  std::string died;
  while (Clock::now() - frozen_at < std::chrono::seconds(9)) {
    Json now = c.try_status(50);
    if (!now.is_null())
      for (const std::string& id : healthy)
        if (find_node(now, id).value("state", "") == "DEAD") died = id;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  spawner.join();
  INFO(spawned.both() << c.logs_tail() << "\nthe spawn took " << spawn_ms << " ms");
  CHECK(died.empty());
  // The spawn did wait on the frozen node (the head's answer came after its 10 s node timeout).
  CHECK(spawn_ms >= 9000);
  // Once the service is free again the frozen node itself is found out as usual.
  REQUIRE(poll_until([&] {
    Json now = c.try_status(50);
    return !now.is_null() && find_node(now, frozen_id).value("state", "") == "DEAD";
  }, std::chrono::seconds(20), std::chrono::milliseconds(200)));
  view = c.status();
  for (const std::string& id : healthy) CHECK(find_node(view, id).at("state") == "ALIVE");
}

TEST_CASE("the cluster rides out a redis-server stop and restart", "[cluster]") {
  ClusterFixture c;
  c.up("--nodes 3 --cpus 2");
  auto spawn = c.troupe("spawn counter --count 20 --json", 60);
  INFO(spawn.both());
  REQUIRE(spawn.exit_code == 0);
  Json before = c.status();
  REQUIRE(before.at("actors").size() == 20);
  REQUIRE(nodes_in_state(before, "ALIVE").size() == 4);

  const auto pids = c.session_pids();
  const pid_t redis_pid = c.pid_of("redis");
  REQUIRE(redis_pid > 0);

  // 1. The GCS frozen (SIGSTOP) for longer than node_dead_after_ms, but shorter than the head's
  //    watchdog takes for hung (gcs/redis_watchdog.h): without the head's grace after an outage,
  //    every node would be declared dead the moment the GCS answers again. The length of the
  //    outage is the scenario, not a synchronisation.
  REQUIRE(::kill(redis_pid, SIGSTOP) == 0);
  std::this_thread::sleep_for(kNodeDeadAfter + std::chrono::milliseconds(500));
  REQUIRE(::kill(redis_pid, SIGCONT) == 0);
  REQUIRE(poll_until([&] { return !c.try_status(10).is_null(); }, std::chrono::seconds(15), std::chrono::milliseconds(200)));
  Json view;
  bool stayed_alive = !poll_until(
      [&] {
        view = c.status(100);
        return nodes_in_state(view, "ALIVE").size() != 4;
      },
      kNodeDeadAfter + std::chrono::milliseconds(1500), std::chrono::milliseconds(250));
  INFO("after the freeze: nodes " << view.at("nodes").dump(2) << "\nevents: " << view.at("events").dump(2));
  CHECK(stayed_alive);
  CHECK(c.pid_of("redis") == redis_pid);  // frozen, not hung long enough to be replaced

  // 2. The GCS killed (what the OOM killer does): nobody restarts it by hand; the head's watchdog
  //    starts it again on the same port, password and append-only file, and records it.
  REQUIRE(::kill(redis_pid, SIGKILL) == 0);
  REQUIRE(poll_until([&] { return process_gone(redis_pid); }, std::chrono::seconds(10)));
  const pid_t new_redis = c.restarted_gcs(redis_pid);
  REQUIRE(new_redis > 0);

  // status works again, every node is still ALIVE, every actor record survived.
  Json after;
  REQUIRE(poll_until(
      [&] {
        after = c.try_status(100);
        return !after.is_null();
      },
      std::chrono::seconds(15), std::chrono::milliseconds(200)));
  INFO(after.at("nodes").dump(2) << after.at("events").dump(2) << c.logs_tail());
  CHECK(nodes_in_state(after, "ALIVE").size() == 4);
  std::map<std::string, std::string> actor_state;
  for (const Json& a : after.at("actors")) actor_state[a.at("id").get<std::string>()] = a.at("state").get<std::string>();
  for (const Json& a : before.at("actors")) {
    INFO("actor " << a.at("id"));
    const std::string id = a.at("id");
    REQUIRE(actor_state.count(id) == 1);
    CHECK(actor_state[id] == a.at("state").get<std::string>());
  }

  // The restart is an event users see (troupe status, the dashboard's events).
  std::string restarted;
  CHECK(poll_until([&] {
    Json now = c.try_status(100);
    if (now.is_null()) return false;
    for (const Json& e : now.at("events"))
      if (e.at("kind") == "gcs_restarted") restarted = e.at("message").get<std::string>();
    return !restarted.empty();
  }, std::chrono::seconds(10), std::chrono::milliseconds(200)));
  CHECK(restarted.find("(pid " + std::to_string(redis_pid) + ") died") != std::string::npos);
  // And they stay ALIVE past the grace period: heartbeats reach the GCS again, nobody is suspected.
  stayed_alive = !poll_until(
      [&] {
        view = c.status(100);
        return nodes_in_state(view, "ALIVE").size() != 4;
      },
      kNodeDeadAfter + std::chrono::milliseconds(1500), std::chrono::milliseconds(250));
  INFO("nodes: " << view.at("nodes").dump(2) << "\nevents: " << view.at("events").dump(2));
  CHECK(stayed_alive);

  // No troupe process crashed through any of it.
  for (const auto& [role, pid] : pids) {
    if (role == "redis") continue;
    INFO(role << " (pid " << pid << ") exited during the redis outage");
    CHECK(!process_gone(pid));
  }
  CHECK(!process_gone(new_redis));
}
