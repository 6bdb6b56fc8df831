// The head's service actor: the cluster's front door. Nodes join through it (token and version
// checked by the ClusterManager), heartbeat to it, and are monitored by it, so a node whose
// connection drops is DEAD at once; drivers ask it for actors, which it places with the Scheduler
// and starts through the chosen nodes' node managers.
//
//   RegisterNode -> RegisterReply   refusals: invalid_argument (token, bad fields), version_mismatch,
//                                   unavailable (the node's own node manager cannot be reached)
//   Heartbeat    -> HeartbeatAck    invalid_argument when the node was declared DEAD (it must exit)
//   SpawnActors  -> SpawnActorsReply
//   SubmitJob    -> SubmitJobReply     a job's actors as one gang; supervised (actors/job_supervisor.h)
//   StopJob      -> StopJobReply       not_found for an unknown job
//   StopActor    -> StopActorReply     an actor outside jobs, ALIVE or waiting to be placed; not_found
//                                      (unknown, or neither),
//                                      invalid_argument for a job's actor (stop the job)
//
// Actor records it writes: PENDING (with the demand) before asking a node, PENDING with the
// scheduler's reason when nothing fits (or the node's refusal, e.g. no whole GPU free), ALIVE with
// the GPUs the node manager gave (gpu_ids) once started; the node's ActorStateWriter writes DEAD.
// A GPU demand above 1 that is not whole is refused (invalid_argument naming --gpus).
// It runs detached (its own thread): its handlers block on the GCS and on node managers, each call
// with a deadline.
#pragma once

#include <string>

#include "actors/actor_system.h"
#include "actors/cluster_manager.h"
#include "actors/head_messages.h"
#include "caf/actor.hpp"
#include "gcs/store.h"

namespace troupe::actors {

struct HeadServiceOptions {
  gcs::Store* store = nullptr;               // outlives the actor
  ClusterManager* cluster = nullptr;         // outlives the actor
  ActorSystem* system = nullptr;             // for connecting to node managers
  RegisterReply gcs_info;                    // redis address and password handed to joining nodes
  std::string default_policy = "spread";     // scheduler_policy setting
  NodeId head_node;                          // the head's own node (registered by the caller)
  caf::actor head_node_manager;              // hosts actors placed on the head
  std::chrono::milliseconds node_timeout{10000};  // per call to a node manager
};

caf::actor spawn_head_service(caf::actor_system& sys, HeadServiceOptions options);

// Sent to the head service once it is published: it takes over what an earlier head left in the
// GCS — the resources of actors alive on the nodes, the jobs still running, supervised again, and
// the `troupe spawn` actors still alive, monitored again (their resources go back when they exit).
void adopt_earlier_jobs(const caf::actor& service);

}  // namespace troupe::actors
