// Blocking, deadline-bound calls to a node manager (local or on another node) and to any actor
// that speaks Call: what the head, the CLI and tests use. Each call waits at most `timeout` and
// returns the node manager's refusal as a Status with its troupe code (see node_manager_actor.h);
// a timeout or a lost peer become timeout / unavailable naming the node manager.
//
//   NodeManagerClient nm(sys, handle_from_connect, std::chrono::seconds(10));
//   auto echo = nm.spawn({"echo", "my-echo"});                 // Expected<SpawnReply>
//   auto many = nm.spawn_batch(std::vector<SpawnRequest>(1000, {"echo"}));
//   auto r = call(sys, echo->handle, Call{"echo", "hi"}, std::chrono::seconds(2));
//
// Each call runs a short-lived caf::scoped_actor: fine for control-plane traffic. Hot loops should
// message the actor handles from their own event-based actors instead.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "actors/messages.h"
#include "caf/actor.hpp"
#include "caf/fwd.hpp"
#include "core/ids.h"
#include "core/status.h"

namespace troupe::actors {

class NodeManagerClient {
 public:
  NodeManagerClient(caf::actor_system& sys, caf::actor node_manager,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10));

  Expected<SpawnReply> spawn(const SpawnRequest& req) const;
  // All-or-nothing; replies in request order.
  Expected<std::vector<SpawnReply>> spawn_batch(std::vector<SpawnRequest> reqs) const;
  Expected<LookupReply> lookup(const ActorId& id) const;
  Expected<LookupReply> lookup_name(const std::string& name) const;
  Expected<std::vector<LiveActor>> list() const;
  Status stop(const ActorId& id, const std::string& reason) const;
  Expected<Heartbeat> ping(uint64_t seq) const;

  const caf::actor& handle() const { return node_manager_; }

 private:
  caf::actor_system* sys_;
  caf::actor node_manager_;
  std::chrono::milliseconds timeout_;
};

// Sends `c` to `actor` and waits up to `timeout` for its CallReply.
Expected<CallReply> call(caf::actor_system& sys, const caf::actor& actor, const Call& c,
                         std::chrono::milliseconds timeout);

}  // namespace troupe::actors
