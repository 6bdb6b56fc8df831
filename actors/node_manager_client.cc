#include "actors/node_manager_client.h"

#include <utility>

#include "actors/actor_system.h"
#include "actors/blocking_request.h"
#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"

namespace troupe::actors {


NodeManagerClient::NodeManagerClient(caf::actor_system& sys, caf::actor node_manager,
                                     std::chrono::milliseconds timeout)
    : sys_(&sys), node_manager_(std::move(node_manager)), timeout_(timeout) {}

Expected<SpawnReply> NodeManagerClient::spawn(const SpawnRequest& req) const {
  return request_blocking<SpawnReply>(*sys_, node_manager_, timeout_, req,
                                      "spawning actor of type '" + req.type_name + "'");
}

Expected<std::vector<SpawnReply>> NodeManagerClient::spawn_batch(
    std::vector<SpawnRequest> reqs) const {
  const std::string what = "spawning a batch of " + std::to_string(reqs.size()) + " actors";
  Expected<SpawnBatchReply> r = request_blocking<SpawnBatchReply>(
      *sys_, node_manager_, timeout_, SpawnBatchRequest{std::move(reqs)}, what);
  if (!r) return r.status();
  return std::move(r->items);
}

Expected<LookupReply> NodeManagerClient::lookup(const ActorId& id) const {
  return request_blocking<LookupReply>(*sys_, node_manager_, timeout_, LookupRequest{id.hex(), ""},
                                       "looking up actor " + id.hex());
}

Expected<LookupReply> NodeManagerClient::lookup_name(const std::string& name) const {
  return request_blocking<LookupReply>(*sys_, node_manager_, timeout_, LookupRequest{"", name},
                                       "looking up actor '" + name + "'");
}

Expected<std::vector<LiveActor>> NodeManagerClient::list() const {
  auto reply = request_blocking<ListActorsReply>(*sys_, node_manager_, timeout_, ListActorsRequest{},
                                                 "listing the actors of a node manager");
  if (!reply.ok()) return reply.status();
  return std::move(reply->actors);
}

Status NodeManagerClient::stop(const ActorId& id, const std::string& reason) const {
  Expected<StopReply> r = request_blocking<StopReply>(
      *sys_, node_manager_, timeout_, StopRequest{id.hex(), reason}, "stopping actor " + id.hex());
  return r.status();
}

Expected<Heartbeat> NodeManagerClient::ping(uint64_t seq) const {
  return request_blocking<Heartbeat>(*sys_, node_manager_, timeout_, Ping{seq},
                                     "pinging node manager");
}

Expected<CallReply> call(caf::actor_system& sys, const caf::actor& actor, const Call& c,
                         std::chrono::milliseconds timeout) {
  return request_blocking<CallReply>(sys, actor, timeout, c, "calling '" + c.method + "'");
}

}  // namespace troupe::actors
