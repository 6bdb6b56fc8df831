// The head's heartbeat receiver: nodes' heartbeats are answered here, from the ClusterManager's
// memory (ClusterManager::heartbeat never touches the GCS), on an actor of their own that runs
// detached (its own thread). Nothing the head service waits on — the GCS, a node manager, a job's
// bookkeeping — can delay a heartbeat, so neither a GCS outage nor a busy service costs a node its
// place. Nodes learn its handle from RegisterReply::heartbeats.
//
//   Heartbeat -> HeartbeatAck   invalid_argument (declared DEAD: the node must stop), not_found
//                               (never registered: it must register)
#pragma once

#include "actors/cluster_manager.h"
#include "caf/actor.hpp"
#include "caf/actor_system.hpp"

namespace troupe::actors {

// `cluster` must outlive the actor (stop it with an exit message before destroying the manager).
caf::actor spawn_heartbeat_receiver(caf::actor_system& sys, ClusterManager* cluster);

}  // namespace troupe::actors
