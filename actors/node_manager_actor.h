// The node manager: the one actor every troupe node process publishes (ActorSystem::publish). It
// spawns actors of registered types on request, owns and monitors them, and reports their
// lifecycle through a sink. It knows nothing of the GCS: the integrator wires the sink to the
// actor table and the event log.
//
// Interface (messages from actors/messages.h; every refusal is a caf::error of troupe's category,
// see to_error/to_status in actors/actor_system.h, so the code and words survive the network):
//
//   SpawnRequest      -> SpawnReply       invalid_argument: bad hex id, id or name taken, bad GPU
//                                         demand; not_found: unknown type (lists the known ones);
//                                         unavailable: the GPU demand fits no free device (names
//                                         each device's usage); the factory's error otherwise
//   SpawnBatchRequest -> SpawnBatchReply  all-or-nothing; the error names the failing item's index
//   LookupRequest     -> LookupReply      not_found naming the id or name
//   ListActorsRequest -> ListActorsReply  every live actor, in no particular order
//   StopRequest       -> StopReply        not_found when no such live actor; the actor then exits
//                                         with user_shutdown and the sink sees it DEAD, "stopped: ..."
//   Ping              -> Heartbeat        node id, same seq, live actor count
//   ShutdownNode      -> ShutdownNodeReply  its process's pid; then NodeManagerOptions::on_shutdown
//
// Actor lifecycle as this node manager reports it (states of gcs::ActorState):
//
//   spawn ok --> ALIVE --(exits normally / stop request / killed)--> DEAD, crashed = false
//                  |
//                  +--(exception, error exit)------------------------> DEAD, crashed = true
//   node manager exits --> every actor still ALIVE gets user_shutdown --> DEAD, "node manager ..."
//
// Restarts are the caller's decision (it sees `crashed` and may spawn again under the same id).
// Actors spawned here are monitored, not linked: a crash never takes the node manager down.
//
// GPUs: a request's `gpus` demand is given devices of this node (NodeManagerOptions::gpus) before
// its actor is spawned, so the actor can look them up by its id from its first moment; they are
// given back when the actor's down message arrives, when its batch is rolled back, and when the
// node manager exits. The reply, the ALIVE and the DEAD report carry the device indices.
#pragma once

#include <functional>
#include <memory>

#include "actors/gpu_assignment.h"
#include "actors/messages.h"
#include "actors/registry.h"
#include "caf/fwd.hpp"
#include "core/ids.h"

namespace troupe::actors {

// Receives every lifecycle transition. Called on the node manager's thread, one at a time per node
// manager: keep it quick (queue the write) and thread-safe when shared by several node managers.
using StateSink = std::function<void(const ActorStateChange&)>;

struct NodeManagerOptions {
  NodeId node;                               // nil: a random id
  std::shared_ptr<const Registry> registry;  // null: Registry::with_builtins()
  StateSink on_state_change;                 // may be empty
  // The node's GPUs, shared with the actors it hosts so each can find its devices; built for the
  // GPU count the node offers (detected or --gpus). null: a node without GPUs (GPU demands refused).
  std::shared_ptr<GpuAssignments> gpus;
  // Called (on the node manager's thread) when ShutdownNode asks the process to exit; empty: the
  // request is refused (unavailable: a process that cannot be shut down this way).
  std::function<void(const std::string& reason)> on_shutdown;
};

// Spawns a node manager in `sys` and returns its handle (publish it to make it reachable).
caf::actor spawn_node_manager(caf::actor_system& sys, NodeManagerOptions options);

}  // namespace troupe::actors
