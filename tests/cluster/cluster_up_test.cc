// A cluster on this machine, driven through the CLI: `up` brings the head and nodes up, `status`
// shows them, `spawn` and `call` place and reach actors, `down` leaves nothing behind.
#include <catch2/catch.hpp>

#include "tests/cluster/cluster_fixture.h"

using namespace troupe::testing;

TEST_CASE("up starts a head and three nodes that status shows ALIVE", "[cluster]") {
  ClusterFixture c;
  auto up = c.up("--nodes 3 --cpus 2");
  CHECK(up.out.find("join: ") != std::string::npos);
  CHECK(up.out.find("--token " + c.cluster_file().at("token").get<std::string>()) != std::string::npos);

  Json view = c.status();
  INFO(view.dump(2));
  REQUIRE(view.at("nodes").size() == 4);
  CHECK(nodes_in_state(view, "ALIVE").size() == 4);
  int heads = 0;
  for (const Json& n : view.at("nodes")) {
    heads += n.at("is_head").get<bool>();
    CHECK(n.at("resources").at("total").at("cpus").get<double>() == 2.0);
    CHECK(n.at("address").get<std::string>().rfind("127.0.0.1:", 0) == 0);
    CHECK(n.at("heartbeat_age_ms").get<int64_t>() >= 0);
  }
  CHECK(heads == 1);
  CHECK(view.at("summary").at("nodes_by_state").at("ALIVE") == 4);
  CHECK(view.at("cluster").at("head_address") == c.cluster_file().at("head_address"));

  // The table for people names every node by its short id, and marks the head.
  auto human = c.troupe("status");
  INFO(human.both());
  REQUIRE(human.exit_code == 0);
  CHECK(human.out.find("NODES (4)") != std::string::npos);
  CHECK(human.out.find("(head)") != std::string::npos);
  for (const Json& n : view.at("nodes")) {
    CHECK(human.out.find(n.at("id").get<std::string>().substr(0, 8)) != std::string::npos);
  }
}

TEST_CASE("a thousand echo actors start ALIVE and all answer a call", "[cluster]") {
  ClusterFixture c;
  c.up("--nodes 3 --cpus 2 --gpus 0");

  auto spawn = c.troupe("spawn echo --count 1000 --json", 120);
  INFO(spawn.both() << c.logs_tail());
  REQUIRE(spawn.exit_code == 0);
  Json spawned = Json::parse(spawn.last_line());
  REQUIRE(spawned.at("actor_ids").size() == 1000);
  CHECK(spawned.at("started") == 1000);

  // Every one of them is ALIVE in the GCS (the records may trail the reply: poll).
  Json view;
  const bool all_alive = poll_until(
      [&] {
        view = c.status();
        int alive = 0;
        for (const Json& a : view.at("actors")) alive += a.at("state") == "ALIVE";
        return alive == 1000;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(250));
  INFO("actors by state: " << view.at("summary").at("actors_by_state").dump());
  REQUIRE(all_alive);
  std::set<std::string> ids;
  for (const Json& a : view.at("actors")) {
    ids.insert(a.at("id").get<std::string>());
    CHECK(a.at("type") == "echo");
  }
  for (const Json& id : spawned.at("actor_ids")) CHECK(ids.count(id.get<std::string>()) == 1);

  auto call = c.troupe("call --all --json --payload ping", 180);
  INFO(call.both());
  REQUIRE(call.exit_code == 0);
  Json called = Json::parse(call.last_line());
  CHECK(called.at("total") == 1000);
  CHECK(called.at("answered") == 1000);
  CHECK(called.at("failed").empty());

  // A demand no node can meet leaves the actors PENDING, with a reason that names the resource.
  auto impossible = c.troupe("spawn echo --count 2 --gpus 4 --json", 60);
  INFO(impossible.both());
  REQUIRE(impossible.exit_code == 0);
  Json pending = Json::parse(impossible.last_line());
  CHECK(pending.at("started") == 0);
  REQUIRE(pending.at("actor_ids").size() == 2);
  REQUIRE(!pending.at("pending_reasons").empty());
  CHECK(pending.at("pending_reasons").dump().find("gpus") != std::string::npos);
  view = c.status();
  for (const Json& id : pending.at("actor_ids")) {
    bool found = false;
    for (const Json& a : view.at("actors")) {
      if (a.at("id") != id) continue;
      found = true;
      CHECK(a.at("state") == "PENDING");
      CHECK(a.at("pending_reason").get<std::string>().find("gpus") != std::string::npos);
    }
    CHECK(found);
  }
}

TEST_CASE("down stops every process of the session and frees the redis port", "[cluster]") {
  ClusterFixture c;
  c.up("--nodes 2 --cpus 1");
  const auto pids = c.session_pids();
  INFO("session processes: " << pids.size());
  REQUIRE(pids.size() == 4);  // redis, head, node-1, node-2
  for (const auto& [role, pid] : pids) {
    INFO(role << " pid " << pid);
    CHECK(!process_gone(pid));
  }
  const int redis_port = c.cluster_file().at("redis_port").get<int>();
  REQUIRE(loopback_port_accepts(redis_port));

  auto down = c.troupe("down", 60);
  INFO(down.both());
  REQUIRE(down.exit_code == 0);
  CHECK(down.out.find("4 processes stopped") != std::string::npos);
  for (const auto& [role, pid] : pids) {
    INFO(role << " pid " << pid << " still runs after `troupe down`");
    CHECK(process_gone(pid));
  }
  CHECK(!loopback_port_accepts(redis_port));
  CHECK(c.session_pids().empty());

  // A second down finds nothing to stop and still succeeds.
  auto again = c.troupe("down", 60);
  INFO(again.both());
  CHECK(again.exit_code == 0);
  CHECK(again.out.find("no cluster processes were running") != std::string::npos);
}

TEST_CASE("logs finds the log of a process by role, node id or actor id", "[cluster]") {
  ClusterFixture c;
  c.up("--nodes 2");
  auto spawned = c.troupe("spawn echo --count 6 --json");
  REQUIRE(spawned.exit_code == 0);
  Json view = c.status();
  for (const Json& n : view.at("nodes")) {
    if (n.at("is_head").get<bool>()) continue;
    const std::string id = n.at("id").get<std::string>().substr(0, 8);
    auto r = c.troupe("logs " + id + " -n 50");
    INFO(r.both());
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("node " + id + " joined the head") != std::string::npos);  // that node's own log
  }
  for (const Json& a : view.at("actors")) {
    const std::string node = a.at("node").get<std::string>().substr(0, 8);
    auto r = c.troupe("logs " + a.at("id").get<std::string>() + " -n 50");
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find(node) != std::string::npos);  // the log of the node hosting the actor
  }
  CHECK(c.troupe("logs head").exit_code == 0);
  auto unknown = c.troupe("logs ffffffff");
  CHECK(unknown.exit_code == 1);
}

TEST_CASE("actors are found by name and answer calls from another process", "[cluster]") {
  ClusterFixture c;
  c.up("--nodes 1");
  auto spawned = c.troupe("spawn counter --count 2 --name-prefix ctr- --args 5");
  INFO(spawned.both());
  REQUIRE(spawned.exit_code == 0);
  auto add = c.troupe("call ctr-1 --method add --payload 3 --json");
  INFO(add.both());
  REQUIRE(add.exit_code == 0);
  CHECK(Json::parse(add.last_line()).at("answered") == 1);
  auto missing = c.troupe("call no-such-actor");
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("found 0 of the 1") != std::string::npos);
}

TEST_CASE("up --redis uses an existing redis-server and leaves it running", "[cluster]") {
  ClusterFixture c;
  const int port = c.start_external_redis("ext-secret", "--save ''");
  const std::string dir = c.home() + "/external-redis";
  c.up("--nodes 1 --redis 127.0.0.1:" + std::to_string(port) + " --redis-password ext-secret");
  Json view = c.status();
  CHECK(nodes_in_state(view, "ALIVE").size() == 2);
  CHECK(view.at("cluster").at("embedded_redis") == false);
  auto down = c.troupe("down");
  CHECK(down.exit_code == 0);
  CHECK(loopback_port_accepts(port));  // not ours to stop
  auto pid = std::stoi(slurp(dir + "/redis.pid"));
  ::kill(pid, SIGTERM);
  CHECK(poll_until([&] { return !loopback_port_accepts(port); }, std::chrono::seconds(10)));
}
