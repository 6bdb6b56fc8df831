// GPU actors on a real cluster: the head offers three fake GPUs (`troupe up --gpus 3`); its node
// manager gives each GPU actor devices of its own, `troupe status --json` and `troupe status` show
// which, shares of a device pack onto one, a demand the node cannot meet waits PENDING with a
// reason and starts once `troupe stop` frees a device, and a demand like 1.5 GPUs is refused
// naming the flag.
#include <catch2/catch.hpp>

#include "tests/cluster/cluster_fixture.h"

using namespace troupe::testing;

namespace {

// The actors of `view` whose ids are in `ids` (a spawn's "actor_ids").
std::vector<Json> actors_with_ids(const Json& view, const Json& ids) {
  std::vector<Json> out;
  for (const Json& a : view.at("actors")) {
    for (const Json& id : ids) {
      if (a.at("id") == id) out.push_back(a);
    }
  }
  return out;
}

// `troupe spawn <args> --json`, required to succeed; its reply.
Json spawn(ClusterFixture& c, const std::string& args) {
  auto r = c.troupe("spawn " + args + " --json", 60);
  INFO("troupe spawn " << args << "\n" << r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  return Json::parse(r.last_line());
}

}  // namespace

TEST_CASE("gpu actors get devices of their own, shares pack, and a demand that does not fit waits",
          "[cluster][gpus]") {
  ClusterFixture c;
  c.up("--nodes 0 --cpus 4 --gpus 3");
  const Json nodes = c.status().at("nodes");  // held: a loop over a temporary's member would dangle
  std::string head;
  for (const Json& n : nodes) {
    if (n.at("is_head").get<bool>()) head = n.at("id").get<std::string>();
  }
  REQUIRE(!head.empty());

  Json whole = spawn(c, "echo --gpus 1 --count 2");
  REQUIRE(whole.at("started") == 2);
  Json halves = spawn(c, "echo --gpus 0.5 --count 2");
  REQUIRE(halves.at("started") == 2);

  // The head records them ALIVE with their devices (poll: the records may trail the reply).
  Json view;
  std::vector<Json> w, h;
  const bool recorded = poll_until(
      [&] {
        view = c.status();
        w = actors_with_ids(view, whole.at("actor_ids"));
        h = actors_with_ids(view, halves.at("actor_ids"));
        for (const auto* group : {&w, &h}) {
          for (const Json& a : *group) {
            if (a.at("state") != "ALIVE" || a.at("gpu_ids").empty()) return false;
          }
        }
        return w.size() == 2 && h.size() == 2;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(250));
  INFO(view.at("actors").dump(2));
  REQUIRE(recorded);
  std::set<std::vector<int>> whole_ids;
  for (const Json& a : w) {
    CHECK(a.at("node") == head);
    whole_ids.insert(a.at("gpu_ids").get<std::vector<int>>());
  }
  CHECK(whole_ids == std::set<std::vector<int>>{{0}, {1}});
  for (const Json& a : h) {  // both halves on the one device left, not one each
    CHECK(a.at("node") == head);
    CHECK(a.at("gpu_ids") == Json::array({2}));
  }

  // Every device is taken: a third whole-GPU actor waits, and says for what.
  Json third = spawn(c, "echo --gpus 1");
  CHECK(third.at("started") == 0);
  CHECK(third.at("pending_reasons").dump().find("gpu") != std::string::npos);
  view = c.status();
  std::vector<Json> pending = actors_with_ids(view, third.at("actor_ids"));
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].at("state") == "PENDING");
  CHECK(pending[0].at("pending_reason").get<std::string>().find("gpu") != std::string::npos);
  CHECK(pending[0].at("gpu_ids").empty());

  // The table for people puts the devices on each live GPU actor's line.
  auto human = c.troupe("status", 60);
  INFO(human.both());
  REQUIRE(human.exit_code == 0);
  for (const Json& a : w) {
    const std::string line = "ALIVE   " + a.at("id").get<std::string>().substr(0, 8) + " echo on " + head.substr(0, 8) +
                             ": gpu " + std::to_string(a.at("gpu_ids")[0].get<int>());
    CHECK(human.out.find(line) != std::string::npos);
  }

  // 1.5 GPUs means nothing to a device: refused before anything is placed, naming the flag.
  auto odd = c.troupe("spawn echo --gpus 1.5", 60);
  INFO(odd.both());
  CHECK(odd.exit_code != 0);
  CHECK(odd.both().find("--gpus 1.5") != std::string::npos);
  CHECK(odd.both().find("a demand above 1 GPU must be a whole number") != std::string::npos);
  CHECK(c.status().at("actors").size() == 5);

  // `troupe stop ACTOR` ends one whole-GPU actor: the node records it DEAD and frees its device,
  // the head gives its GPU back to the scheduler, and the actor that was waiting starts on it.
  const std::string gone = w[0].at("id").get<std::string>();
  const int freed = w[0].at("gpu_ids")[0].get<int>();
  auto stop = c.troupe("stop " + gone.substr(0, 8), 60);
  INFO(stop.both() << c.logs_tail());
  REQUIRE(stop.exit_code == 0);
  CHECK(stop.out.find("actor " + gone.substr(0, 8) + " on node " + head.substr(0, 8)) != std::string::npos);
  Json dead, started;
  REQUIRE(poll_until([&] {
    const Json now = c.status();  // held: a loop over a temporary's member would dangle
    for (const Json& a : now.at("actors")) {
      if (a.at("id") == gone && a.at("state") == "FINISHED") dead = a;  // stopped: ended without failing
      if (a.at("id") == third.at("actor_ids")[0] && a.at("state") == "ALIVE") started = a;
    }
    return !dead.is_null() && !started.is_null();
  }, std::chrono::seconds(20), std::chrono::milliseconds(250)));
  CHECK(dead.at("death_reason").get<std::string>().find("stopped by troupe stop") != std::string::npos);
  CHECK(started.at("gpu_ids") == Json::array({freed}));

  // Every device is taken again: the next one waits, and `troupe stop` takes it off the queue.
  Json next = spawn(c, "echo --gpus 1");
  CHECK(next.at("started") == 0);
  const std::string waiting = next.at("actor_ids")[0].get<std::string>();
  auto unqueue = c.troupe("stop " + waiting.substr(0, 8), 60);
  INFO(unqueue.both());
  CHECK(unqueue.exit_code == 0);
  std::vector<Json> stopped = actors_with_ids(c.status(), next.at("actor_ids"));
  REQUIRE(stopped.size() == 1);
  CHECK(stopped[0].at("state") == "DEAD");
  CHECK(stopped[0].at("death_reason").get<std::string>().find("stopped before it was placed") != std::string::npos);

  // Stopping it again, or something that is not an actor, says why.
  auto again = c.troupe("stop " + gone.substr(0, 8), 60);
  CHECK(again.exit_code != 0);
  CHECK(again.both().find("FINISHED, not ALIVE") != std::string::npos);
  auto nothing = c.troupe("stop 0000ffff", 60);
  CHECK(nothing.exit_code != 0);
  CHECK(nothing.both().find("no job or actor 0000ffff") != std::string::npos);
}
