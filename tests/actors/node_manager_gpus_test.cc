// Node manager with GPUs: each GPU actor gets devices of its own (through a remote node manager, so
// the demand and the devices cross the wire), a demand that does not fit names the devices' usage,
// devices come back when an actor stops, when a batch fails midway and when the node manager exits,
// and an actor finds its devices by its id from its first moment.
#include "actors/node_manager_client.h"
#include "caf/event_based_actor.hpp"
#include "tests/actors/caf_test_util.h"

using namespace troupe;
using namespace troupe::actors;

namespace {

constexpr auto kTimeout = std::chrono::seconds(10);
using Devices = std::vector<int>;

SpawnRequest gpu_request(const std::string& type, double gpus, std::vector<std::string> args = {}) {
  SpawnRequest r = spawn_request(type, "", std::move(args));
  r.gpus = gpus;
  return r;
}

// The built-ins, "broken" (its factory always fails) and "whoami" (args[0]: its own actor id;
// answers Call{"gpus"} with the devices the shared table lists for it, as job actors look them up).
std::shared_ptr<const Registry> gpu_registry(std::shared_ptr<GpuAssignments> gpus) {
  auto reg = std::make_shared<Registry>(Registry::with_builtins());
  REQUIRE(reg->add("broken", [](caf::actor_system&, const std::vector<std::string>&) -> Expected<caf::actor> {
                return internal_error("this factory always fails");
              }).ok());
  REQUIRE(reg->add_behavior("whoami", [gpus](caf::event_based_actor*, const std::vector<std::string>& args) {
                ActorId me = *ActorId::from_hex(args.at(0));
                std::string seen;  // read as the actor starts, before any message
                for (int d : gpus->devices_of(me)) seen += (seen.empty() ? "" : ",") + std::to_string(d);
                return caf::behavior{[seen](const Call&) { return CallReply{seen}; }};
              }).ok());
  return reg;
}

struct GpuNode {
  std::shared_ptr<GpuAssignments> gpus;
  test::TestNode node;
  explicit GpuNode(int devices, const NodeId& id = NodeId::random())
      : gpus(std::make_shared<GpuAssignments>(id, devices)), node(gpu_registry(gpus), "sharing", gpus) {}
};

auto finished(const std::string& id) {
  return [id](const ActorStateChange& c) { return c.actor_id == id && c.state == gcs::ActorState::finished; };
}

}  // namespace

TEST_CASE("node manager gpus: two 1-GPU actors get devices 0 and 1, a third is refused, a stopped one's "
          "device goes to the next",
          "[actors][gpus]") {
  GpuNode n(2);
  auto head = test::start_head();
  auto remote = head->connect("127.0.0.1", n.node.port, kTimeout);
  REQUIRE(remote.ok());
  NodeManagerClient nm(head->system(), *remote, kTimeout);

  auto first = nm.spawn(gpu_request("echo", 1));
  auto second = nm.spawn(gpu_request("echo", 1));
  REQUIRE((first.ok() && second.ok()));
  CHECK(first->gpu_ids == std::vector<int32_t>{0});
  CHECK(second->gpu_ids == std::vector<int32_t>{1});
  CHECK(n.gpus->devices_of(*ActorId::from_hex(second->actor_id)) == Devices{1});
  ActorStateChange alive;
  REQUIRE(n.node.states.wait_for(
      [&](const ActorStateChange& c) { return c.actor_id == second->actor_id && c.state == gcs::ActorState::alive; },
      &alive));
  CHECK(alive.gpu_ids == std::vector<int32_t>{1});

  auto third = nm.spawn(gpu_request("echo", 1));
  REQUIRE(!third.ok());
  CHECK(third.status().code() == Code::unavailable);
  CHECK_THAT(third.status().message(),
             Catch::Contains("no whole GPU free on node") && Catch::Contains("device 0: 1 used, device 1: 1 used"));
  auto none = nm.ping(1);
  REQUIRE(none.ok());
  CHECK(none->live_actors == 2);

  // A CPU actor on the GPU node takes no device.
  auto cpu = nm.spawn(gpu_request("echo", 0));
  REQUIRE(cpu.ok());
  CHECK(cpu->gpu_ids.empty());

  REQUIRE(nm.stop(*ActorId::from_hex(first->actor_id), "make room").ok());
  ActorStateChange gone;
  REQUIRE(n.node.states.wait_for(finished(first->actor_id), &gone));  // stopped: FINISHED
  CHECK(gone.gpu_ids == std::vector<int32_t>{0});  // the FINISHED report still says what it held
  auto next = nm.spawn(gpu_request("echo", 1));
  REQUIRE(next.ok());
  CHECK(next->gpu_ids == std::vector<int32_t>{0});
}

TEST_CASE("node manager gpus: a batch failing midway gives back every device it took", "[actors][gpus]") {
  GpuNode n(2);
  NodeManagerClient nm(n.node.sys->system(), n.node.node_manager, kTimeout);

  // The factory of item 1 fails after item 0 was spawned on device 0.
  auto broken = nm.spawn_batch({gpu_request("echo", 1), gpu_request("broken", 1)});
  REQUIRE(!broken.ok());
  CHECK_THAT(broken.status().message(), Catch::Contains("item 1 of 2") && Catch::Contains("always fails"));
  CHECK(n.gpus->usage() == std::vector<double>{0, 0});

  // Item 2 does not fit: nothing of the batch is spawned.
  auto too_many = nm.spawn_batch({gpu_request("echo", 1), gpu_request("echo", 0.5), gpu_request("echo", 1)});
  REQUIRE(!too_many.ok());
  CHECK(too_many.status().code() == Code::unavailable);
  CHECK_THAT(too_many.status().message(),
             Catch::Contains("item 2 of 3") && Catch::Contains("device 0: 1 used, device 1: 0.5 used"));
  CHECK(n.gpus->usage() == std::vector<double>{0, 0});
  auto hb = nm.ping(1);
  REQUIRE(hb.ok());
  CHECK(hb->live_actors == 0);

  // A bad demand is refused before anything is taken.
  auto bad = nm.spawn_batch({gpu_request("echo", 1), gpu_request("echo", 1.5)});
  REQUIRE(!bad.ok());
  CHECK(bad.status().code() == Code::invalid_argument);
  CHECK(n.gpus->usage() == std::vector<double>{0, 0});

  auto both = nm.spawn_batch({gpu_request("echo", 1), gpu_request("echo", 1)});
  REQUIRE(both.ok());
  CHECK((*both)[0].gpu_ids == std::vector<int32_t>{0});
  CHECK((*both)[1].gpu_ids == std::vector<int32_t>{1});
}

TEST_CASE("node manager gpus: an actor finds its own devices as it starts", "[actors][gpus]") {
  GpuNode n(4);
  NodeManagerClient nm(n.node.sys->system(), n.node.node_manager, kTimeout);
  REQUIRE(nm.spawn(gpu_request("echo", 1)).ok());  // device 0
  const ActorId id = ActorId::random();
  SpawnRequest req = gpu_request("whoami", 2, {id.hex()});
  req.actor_id = id.hex();
  auto me = nm.spawn(req);
  REQUIRE(me.ok());
  CHECK(me->gpu_ids == std::vector<int32_t>{1, 2});
  auto seen = call(n.node.sys->system(), me->handle, Call{"gpus", ""}, kTimeout);
  REQUIRE(seen.ok());
  CHECK(seen->payload == "1,2");
}

TEST_CASE("node manager gpus: a node manager that exits gives back its actors' devices", "[actors][gpus]") {
  auto gpus = std::make_shared<GpuAssignments>(NodeId::random(), 2);
  {
    test::TestNode node(nullptr, "sharing", gpus);
    NodeManagerClient nm(node.sys->system(), node.node_manager, kTimeout);
    REQUIRE(nm.spawn_batch({gpu_request("echo", 1), gpu_request("echo", 0.25)}).ok());
    CHECK(gpus->usage() == std::vector<double>{1, 0.25});
  }  // the actor system stops, and with it the node manager
  CHECK(gpus->usage() == std::vector<double>{0, 0});

  // A node manager without GPUs refuses a GPU demand and says why.
  test::TestNode cpu_only;
  NodeManagerClient cpu_nm(cpu_only.sys->system(), cpu_only.node_manager, kTimeout);
  auto refused = cpu_nm.spawn(gpu_request("echo", 1));
  REQUIRE(!refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("it offers none"));
}
