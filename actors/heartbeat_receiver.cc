#include "actors/heartbeat_receiver.h"

#include "actors/actor_system.h"
#include "actors/head_messages.h"
#include "actors/messages.h"
#include "caf/event_based_actor.hpp"
#include "gcs/events.h"

namespace troupe::actors {
namespace {

caf::behavior heartbeat_receiver(caf::event_based_actor*, ClusterManager* cluster) {
  return {
      [cluster](const Heartbeat& h) -> caf::result<HeartbeatAck> {
        auto id = NodeId::from_hex(h.node_id);
        if (!id.ok()) return to_error(id.status());
        Status st = cluster->heartbeat(*id);
        if (!st.ok()) return to_error(st);
        return HeartbeatAck{gcs::now_ms()};
      },
  };
}

}  // namespace

caf::actor spawn_heartbeat_receiver(caf::actor_system& sys, ClusterManager* cluster) {
  return sys.spawn<caf::detached>(heartbeat_receiver, cluster);
}

}  // namespace troupe::actors
