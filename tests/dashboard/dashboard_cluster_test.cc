// The dashboard of a real cluster (`troupe up` through ClusterFixture): the URL `troupe up` prints
// serves the same nodes, actors and jobs as `troupe status --json`, and a node killed with SIGKILL
// shows DEAD through the API within the failure detector's bound.
#include <catch2/catch.hpp>

#include <signal.h>

#include <regex>

#include <httplib.h>

#include "tests/cluster/cluster_fixture.h"
#include "tests/dashboard/dashboard_url.h"

using namespace troupe::testing;

namespace {

// id -> state of every entry of one section of a cluster document.
std::map<std::string, std::string> states_of(const Json& view, const char* section) {
  std::map<std::string, std::string> out;
  for (const Json& x : view.at(section)) out[x.at("id")] = x.at("state");
  return out;
}

}  // namespace

TEST_CASE("the dashboard troupe up prints agrees with troupe status and sees a killed node DEAD", "[cluster]") {
  ClusterFixture c;
  auto up = c.up("--nodes 1 --cpus 2");
  const DashboardUrl url = dashboard_url(up.out);
  CHECK(url.host == "127.0.0.1");
  auto spawn = c.troupe("spawn echo --count 6 --policy spread --json", 60);
  INFO(spawn.both());
  REQUIRE(spawn.exit_code == 0);

  // The same nodes, actors and jobs, in the same states (nothing moves between the two reads: the
  // actors are started and the nodes heartbeat without changing state).
  const Json status = c.status();
  const Json api = get_json(url, "/api/cluster");
  for (const char* section : {"nodes", "actors", "jobs"}) {
    INFO(section << "\nstatus: " << status.at(section).dump() << "\napi: " << api.at(section).dump());
    CHECK(states_of(api, section) == states_of(status, section));
  }
  CHECK(api.at("nodes").size() == 2);
  CHECK(api.at("actors").size() == 6);
  CHECK(status.at("cluster").at("dashboard") == "http://" + url.host + ":" + std::to_string(url.port));

  // The page is there too.
  httplib::Client client(url.host, url.port);
  auto page = client.Get("/");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK(page->body.find("troupe dashboard") != std::string::npos);

  // kill -9 the node: DEAD through the API within the detection bound.
  const pid_t victim = c.pid_of("node-1");
  REQUIRE(victim > 0);
  std::string victim_id;
  for (const Json& n : api.at("nodes")) {
    if (n.at("pid").get<int64_t>() == victim) victim_id = n.at("id");
  }
  REQUIRE(!victim_id.empty());
  REQUIRE(::kill(victim, SIGKILL) == 0);
  const auto killed_at = Clock::now();
  Json node;
  const bool dead = poll_until(
      [&] {
        node = get_json(url, "/api/nodes/" + victim_id).at("node");
        return node.at("state") == "DEAD";
      },
      kNodeDeadAfter + kDetectionSlack, std::chrono::milliseconds(50));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed_at).count();
  INFO("after " << ms << " ms: " << node.dump() << c.logs_tail());
  REQUIRE(dead);
  CHECK(!node.at("death_reason").get<std::string>().empty());
  // And the two views still agree once the sweep of its actors is written.
  REQUIRE(poll_until(
      [&] {
        const Json s = c.status();
        const Json a = get_json(url, "/api/cluster");
        return states_of(s, "nodes") == states_of(a, "nodes") && states_of(s, "actors") == states_of(a, "actors");
      },
      std::chrono::seconds(5), std::chrono::milliseconds(200)));
}

TEST_CASE("dashboard_port -1 turns the dashboard off and troupe up says so", "[cluster]") {
  ClusterFixture c;
  auto up = c.troupe("up --nodes 0", 90, "TROUPE_DASHBOARD_PORT=-1");
  INFO(up.both() << c.logs_tail());
  REQUIRE(up.exit_code == 0);
  CHECK(up.out.find("dashboard:  off") != std::string::npos);
}
