// The messages of the head's service actor (actors/head_service.h): how nodes join and stay alive,
// and how drivers ask the cluster for actors. Same conventions as actors/messages.h.
//
//   node   --RegisterNode--> head -> RegisterReply (or an error: wrong token, version mismatch)
//   node   --Heartbeat-----> the head's heartbeat receiver (RegisterReply::heartbeats) -> HeartbeatAck
//                            (an error when the head declared the node DEAD)
//   driver --SpawnActors---> head -> SpawnActorsReply (placed and started, or PENDING with reasons)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "caf/actor.hpp"
#include "caf/meta/type_name.hpp"

namespace troupe::actors {

struct RegisterNode {
  std::string token;            // the cluster's join token
  std::string version;          // the node's troupe version
  std::string node_id;          // hex; the node picks it (a restarted node picks a new one)
  std::string address;          // host:port of the node's published node manager
  std::string hostname;
  int32_t pid = 0;
  double cpus = 0;
  double gpus = 0;
  int64_t memory_bytes = 0;
  std::vector<std::string> gpu_names;
  std::vector<int64_t> gpu_memory_bytes;
};

// What a node needs after joining: where the GCS is and how often to heartbeat.
struct RegisterReply {
  std::string node_id;
  std::string redis_host;
  int32_t redis_port = 0;
  std::string redis_password;
  int64_t heartbeat_period_ms = 200;
  // Where to send heartbeats: the head's heartbeat receiver (actors/heartbeat_receiver.h), which
  // answers them even while the head service waits on the GCS. Invalid: send them to the head.
  caf::actor heartbeats;
};

struct HeartbeatAck {
  int64_t head_ms = 0;
};

// Start `count` actors of a registered type, placed by the scheduler (policy "spread" or "pack"),
// as one gang when `gang` is set, or on one node when `node_id` is set.
struct SpawnActors {
  std::string type_name;
  int32_t count = 1;
  double cpus = 0;
  double gpus = 0;
  std::string policy;            // empty: the scheduler_policy setting
  std::string gang;
  std::string node_id;
  std::string name_prefix;       // names are <prefix><i> when set
  std::vector<std::string> args;
};

struct SpawnActorsReply {
  std::vector<std::string> actor_ids;      // every actor asked for, placed or PENDING
  int32_t started = 0;                     // how many are ALIVE
  std::vector<std::string> pending_reasons;  // one line per reason, for the unplaced ones
};

// A training job's actors, placed as one gang: all started, or none (the job stays PENDING with the
// reason and the head retries while it waits). The job's record (gcs JobRecord) must exist; the head
// writes RUNNING with the actors' ids once they all started, and watches them: an actor that fails
// fails the job and stops the others (actors/job_supervisor.h). Each actor gets its own actor id
// (hex) appended to its args.
struct JobActor {
  std::string type_name;
  std::string name;
  double cpus = 0;
  double gpus = 0;
  std::vector<std::string> args;
};
struct SubmitJob {
  std::string job_id;      // hex
  std::string policy;      // empty: the scheduler_policy setting
  std::vector<JobActor> actors;
  // Supervision (actors/job_supervisor.h): restarts before a failure fails the job, the wait before
  // a restart (doubled while the job fails again before getting past its last failure), and whether
  // one actor's failure restarts every actor of the job (sync: all replicas resume from one
  // checkpoint) or only the failed one (async).
  int32_t max_restarts = 0;
  int64_t restart_backoff_ms = 0;
  bool restart_whole_gang = true;
  // Not a whole gang: a failed parameter server is replaced too (an async job that checkpoints: the
  // replacement restores its shard). Otherwise its failure fails the job (the only copy of its shard).
  bool restore_servers = false;
  // A gang job whose step count (written by its rank 0) stands still this long is stuck — a worker
  // hung, and the others wait for it in a collective — and is restarted like a failed one. 0: never.
  int64_t progress_timeout_ms = 0;
  // A whole-gang job (sync) whose restart finds no room for every worker restarts with as many as
  // fit (at least 1), and grows back to all of them after its next checkpoint once they fit; its
  // workers learn the gang's size from their arguments (actors/job_supervisor.h).
  bool elastic = false;
  // Where a restart places the actors it restarts: "any" (wherever there is room), "same" (each on
  // the node it ran on, unless that node is gone), "other" (the failed actor anywhere but its node).
  std::string restart_on = "any";
  // A sync job that recovers live (trainers/job/live_recovery.h; restart_whole_gang false): a
  // failed worker is replaced alone while the others keep their state, like an async job's; but a
  // stuck job (progress_timeout_ms) and a GCS that lost its data still restart the whole gang from
  // the checkpoint.
  bool live_recovery = false;
};
struct SubmitJobReply {
  std::vector<std::string> actor_ids;  // in the order asked for
  bool started = false;                // false: PENDING, for `pending_reason`
  std::string pending_reason;
};
// Stops a job's actors and records it CANCELLED (unless it already ended).
struct StopJob {
  std::string job_id;
  std::string reason;
};
struct StopJobReply {
  int32_t stopped = 0;  // actors asked to stop
  std::string state;    // the job's state afterwards
};

// Stops one live actor that is not part of a job (`troupe stop ACTOR`); its node records it DEAD.
struct StopActor {
  std::string actor_id;  // hex, whole
  std::string reason;
};
struct StopActorReply {
  std::string node_id;   // hex: where it ran; empty: it was still waiting to be placed
};

// `troupe down`: the head asks every node but its own to shut down (actors/messages.h ShutdownNode)
// and answers, node by node, whether it agreed or why not, with its pid; the nodes' processes then
// exit and the head records them DEAD.
struct ShutdownNodes {
  std::string reason;
};
struct NodeShutdown {
  std::string node_id;   // hex
  std::string hostname;  // as it registered ("" when its record could not be read)
  std::string address;   // its node manager's host:port ("" likewise)
  int32_t pid = 0;       // its process (as it answered, else as its record says; 0: unknown)
  std::string error;     // why it did not answer ("" when it agreed)
};
struct ShutdownNodesReply {
  std::vector<NodeShutdown> nodes;
};

// The head's failure detector declared a node DEAD (heartbeats stopped): the job supervisor treats
// the job actors there as failed. Sent by the head process to its own service.
struct NodeDeclaredDead {
  std::string node_id;  // hex
  std::string reason;
};

// The GCS came back without the head's stamp (gcs/gcs_stamp.h): its records are gone. The head
// service writes back what it knows (actor records from the node managers, job records); running
// jobs restart from the checkpoints mirrored on disk (sync, central, pipeline) or fail naming the
// loss (actors/job_supervisor.h, on_gcs_lost). Sent by the head process to its own service.
struct GcsDataLost {
  std::string what;  // one line for the messages: "the GCS came back without ..."
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ShutdownNodes& x) {
  return f(caf::meta::type_name("troupe.shutdown_nodes"), x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, NodeShutdown& x) {
  return f(caf::meta::type_name("troupe.node_shutdown"), x.node_id, x.hostname, x.address, x.pid, x.error);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ShutdownNodesReply& x) {
  return f(caf::meta::type_name("troupe.shutdown_nodes_reply"), x.nodes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GcsDataLost& x) {
  return f(caf::meta::type_name("troupe.gcs_data_lost"), x.what);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, NodeDeclaredDead& x) {
  return f(caf::meta::type_name("troupe.node_declared_dead"), x.node_id, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, JobActor& x) {
  return f(caf::meta::type_name("troupe.job_actor"), x.type_name, x.name, x.cpus, x.gpus, x.args);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SubmitJob& x) {
  return f(caf::meta::type_name("troupe.submit_job"), x.job_id, x.policy, x.actors, x.max_restarts,
           x.restart_backoff_ms, x.restart_whole_gang, x.restore_servers, x.progress_timeout_ms,
           x.elastic, x.restart_on, x.live_recovery);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SubmitJobReply& x) {
  return f(caf::meta::type_name("troupe.submit_job_reply"), x.actor_ids, x.started, x.pending_reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StopJob& x) {
  return f(caf::meta::type_name("troupe.stop_job"), x.job_id, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StopJobReply& x) {
  return f(caf::meta::type_name("troupe.stop_job_reply"), x.stopped, x.state);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StopActor& x) {
  return f(caf::meta::type_name("troupe.stop_actor"), x.actor_id, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StopActorReply& x) {
  return f(caf::meta::type_name("troupe.stop_actor_reply"), x.node_id);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RegisterNode& x) {
  return f(caf::meta::type_name("troupe.register_node"), x.token, x.version, x.node_id, x.address, x.hostname,
           x.pid, x.cpus, x.gpus, x.memory_bytes, x.gpu_names, x.gpu_memory_bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RegisterReply& x) {
  return f(caf::meta::type_name("troupe.register_reply"), x.node_id, x.redis_host, x.redis_port, x.redis_password,
           x.heartbeat_period_ms, x.heartbeats);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, HeartbeatAck& x) {
  return f(caf::meta::type_name("troupe.heartbeat_ack"), x.head_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SpawnActors& x) {
  return f(caf::meta::type_name("troupe.spawn_actors"), x.type_name, x.count, x.cpus, x.gpus, x.policy, x.gang,
           x.node_id, x.name_prefix, x.args);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SpawnActorsReply& x) {
  return f(caf::meta::type_name("troupe.spawn_actors_reply"), x.actor_ids, x.started, x.pending_reasons);
}

}  // namespace troupe::actors
