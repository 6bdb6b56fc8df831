// Node manager: spawn by type name locally and across nodes, batches, lookups, stops, crashes
// reported through the state sink, and 1,000 actors on two nodes all answering.
#include <stdexcept>

#include "actors/node_manager_client.h"
#include "caf/actor_system.hpp"
#include "caf/event_based_actor.hpp"
#include "tests/actors/caf_test_util.h"

using namespace troupe;
using namespace troupe::actors;

namespace {

constexpr auto kTimeout = std::chrono::seconds(10);

// A registry with the built-ins plus "bomb": answers "ping", throws on "explode", quits on "leave".
std::shared_ptr<const Registry> registry_with_bomb() {
  auto reg = std::make_shared<Registry>(Registry::with_builtins());
  Status st = reg->add_behavior(
      "bomb", [](caf::event_based_actor* self, const std::vector<std::string>&) -> caf::behavior {
        return {[self](const Call& c) -> CallReply {
          if (c.method == "explode") throw std::runtime_error("bomb went off");
          if (c.method == "leave") self->quit();
          return CallReply{"pong"};
        }};
      });
  REQUIRE(st.ok());
  return reg;
}

}  // namespace

TEST_CASE("spawn by type name on the local node, find by name and id, call it", "[actors]") {
  test::TestNode node;
  NodeManagerClient nm(node.sys->system(), node.node_manager, kTimeout);
  auto spawned = nm.spawn(SpawnRequest{"echo", "greeter", "", 0, {}});
  REQUIRE(spawned.ok());
  CHECK(spawned->actor_id.size() == 32);
  CHECK(spawned->actor_name == "greeter");

  auto by_name = nm.lookup_name("greeter");
  REQUIRE(by_name.ok());
  CHECK(by_name->actor_id == spawned->actor_id);
  CHECK(by_name->type_name == "echo");
  auto r = call(node.sys->system(), by_name->handle, Call{"echo", "hi"}, kTimeout);
  REQUIRE(r.ok());
  CHECK(r->payload == "hi");

  ActorStateChange alive;
  REQUIRE(node.states.wait_for(
      [&](const ActorStateChange& c) { return c.actor_id == spawned->actor_id; }, &alive));
  CHECK(alive.state == gcs::ActorState::alive);
  CHECK(alive.type_name == "echo");

  auto missing = nm.lookup_name("nobody");
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == Code::not_found);
  CHECK_THAT(missing.status().message(), Catch::Contains("'nobody'"));
}

TEST_CASE("spawn on a remote node with a chosen id, and the handle answers from the head", "[actors]") {
  test::TestNode node;
  auto head = test::start_head();
  auto remote = head->connect("127.0.0.1", node.port, kTimeout);
  REQUIRE(remote.ok());
  NodeManagerClient nm(head->system(), *remote, kTimeout);
  const ActorId id = ActorId::random();
  auto spawned = nm.spawn(SpawnRequest{"counter", "", id.hex(), 0, {"41"}});
  REQUIRE(spawned.ok());
  CHECK(spawned->actor_id == id.hex());
  auto added = call(head->system(), spawned->handle, Call{"add", ""}, kTimeout);
  REQUIRE(added.ok());
  CHECK(added->payload == "42");

  auto found = nm.lookup(id);
  REQUIRE(found.ok());
  auto got = call(head->system(), found->handle, Call{"get", ""}, kTimeout);
  REQUIRE(got.ok());
  CHECK(got->payload == "42");

  auto again = nm.spawn(SpawnRequest{"echo", "", id.hex(), 0, {}});
  REQUIRE(!again.ok());
  CHECK(again.status().code() == Code::invalid_argument);
  CHECK_THAT(again.status().message(), Catch::Contains("already in use"));
}

TEST_CASE("an unknown type requested remotely comes back as not_found listing types", "[actors]") {
  test::TestNode node;
  auto head = test::start_head();
  auto remote = head->connect("127.0.0.1", node.port, kTimeout);
  REQUIRE(remote.ok());
  auto r = NodeManagerClient(head->system(), *remote, kTimeout).spawn(spawn_request("trainer"));
  REQUIRE(!r.ok());
  CHECK(r.status().code() == Code::not_found);
  CHECK_THAT(r.status().message(),
             Catch::Contains("unknown actor type 'trainer'") && Catch::Contains("counter, echo"));
}

TEST_CASE("a spawn batch is all-or-nothing and names the failing item", "[actors]") {
  test::TestNode node;
  NodeManagerClient nm(node.sys->system(), node.node_manager, kTimeout);
  std::vector<SpawnRequest> reqs(5, spawn_request("echo"));
  reqs[3].type_name = "nope";
  auto r = nm.spawn_batch(reqs);
  REQUIRE(!r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("item 3 of 5") && Catch::Contains("'nope'"));
  std::vector<SpawnRequest> dup_names(2, spawn_request("echo", "same"));
  CHECK(!nm.spawn_batch(dup_names).ok());
  auto hb = nm.ping(1);
  REQUIRE(hb.ok());
  CHECK(hb->live_actors == 0);
}

TEST_CASE("1,000 actors spawned across two node managers all answer", "[actors]") {
  test::TestNode a, b;
  auto head = test::start_head();
  std::vector<SpawnReply> all;
  for (test::TestNode* node : {&a, &b}) {
    auto remote = head->connect("127.0.0.1", node->port, kTimeout);
    REQUIRE(remote.ok());
    auto batch = NodeManagerClient(head->system(), *remote, kTimeout)
                     .spawn_batch(std::vector<SpawnRequest>(500, spawn_request("echo")));
    REQUIRE(batch.ok());
    REQUIRE(batch->size() == 500);
    all.insert(all.end(), batch->begin(), batch->end());
  }
  size_t answered = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    auto r = call(head->system(), all[i].handle, Call{"echo", all[i].actor_id}, kTimeout);
    if (r.ok() && r->payload == all[i].actor_id) ++answered;
  }
  CHECK(answered == 1000);
  auto hb = NodeManagerClient(a.sys->system(), a.node_manager, kTimeout).ping(2);
  REQUIRE(hb.ok());
  CHECK(hb->live_actors == 500);
}

TEST_CASE("a crash, a normal exit and a stop reach the state sink", "[actors]") {
  test::TestNode node(registry_with_bomb());
  auto head = test::start_head();
  auto remote = head->connect("127.0.0.1", node.port, kTimeout);
  REQUIRE(remote.ok());
  NodeManagerClient nm(head->system(), *remote, kTimeout);
  auto bomb = nm.spawn(spawn_request("bomb", "b1"));
  auto leaver = nm.spawn(spawn_request("bomb", "b2"));
  auto victim = nm.spawn(spawn_request("echo", "e1"));
  REQUIRE((bomb.ok() && leaver.ok() && victim.ok()));

  auto boom = call(head->system(), bomb->handle, Call{"explode", ""}, kTimeout);
  CHECK(!boom.ok());  // the caller learns the actor failed instead of waiting
  (void)call(head->system(), leaver->handle, Call{"leave", ""}, kTimeout);
  REQUIRE(nm.stop(*ActorId::from_hex(victim->actor_id), "test over").ok());

  auto ended = [](const std::string& id, gcs::ActorState state) {
    return [id, state](const ActorStateChange& c) { return c.actor_id == id && c.state == state; };
  };
  ActorStateChange c;
  REQUIRE(node.states.wait_for(ended(bomb->actor_id, gcs::ActorState::dead), &c));  // a failure: DEAD
  CHECK(c.crashed);
  CHECK_THAT(c.reason, Catch::Contains("bomb went off"));
  CHECK(c.actor_name == "b1");
  REQUIRE(node.states.wait_for(ended(leaver->actor_id, gcs::ActorState::finished), &c));  // no failure: FINISHED
  CHECK(!c.crashed);
  CHECK(c.reason == "exited normally");
  REQUIRE(node.states.wait_for(ended(victim->actor_id, gcs::ActorState::finished), &c));
  CHECK(!c.crashed);
  CHECK(c.reason == "stopped: test over");

  auto gone = nm.lookup_name("b1");
  CHECK(gone.status().code() == Code::not_found);
  auto stop_again = nm.stop(*ActorId::from_hex(victim->actor_id), "twice");
  CHECK(stop_again.code() == Code::not_found);
}
