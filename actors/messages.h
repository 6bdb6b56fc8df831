// The typed control-plane messages of troupe: plain structs that travel between actor systems
// (CAF middleman, BASP over TCP), each with a CAF 0.17.6 inspect() overload and a stable wire name
// ("troupe.spawn_request", ...). register_message_types() announces all of them; every process must
// call it on its caf::actor_system_config before the system starts (ActorSystem::start does).
//
// Payloads stay small: names, hex ids, short strings. Tensors never travel here — they go through
// the collectives' transports.
//
// Who sends what (request -> reply; one-way messages have no reply):
//
//   head/driver --SpawnRequest------> node manager  -> SpawnReply (or caf::error naming the cause)
//   head/driver --SpawnBatchRequest-> node manager  -> SpawnBatchReply (all spawned, or none)
//   anyone      --LookupRequest-----> node manager  -> LookupReply
//   head        --ListActorsRequest-> node manager  -> ListActorsReply (every live actor there)
//   anyone      --StopRequest-------> node manager  -> StopReply
//   anyone      --Ping--------------> node manager  -> Heartbeat
//   anyone      --Call--------------> any actor     -> CallReply
//   anyone      --CallBatch---------> any actor     -> CallBatchReply (one reply per call, in order)
//   anyone      --Cast / CastBatch--> any actor        (one-way)
//   node manager --ActorStateChange-> its state sink (a std::function, not a message on the wire,
//                                     but inspectable so it can be forwarded to the head)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "caf/actor.hpp"
#include "caf/fwd.hpp"
#include "caf/meta/type_name.hpp"
#include "gcs/records.h"

namespace troupe::actors {

// Spawn one actor of a registered type. `actor_id` is 32 hex digits, or empty to let the node
// manager pick a random one. `actor_name`, when set, must be unique on that node. `gpus` is the
// actor's GPU demand, which the node manager turns into devices of its own (actors/gpu_assignment.h;
// placement on the node is the scheduler's job). `args` reach the type's factory unchanged.
struct SpawnRequest {
  std::string type_name;
  std::string actor_name;
  std::string actor_id;
  double gpus = 0;
  std::vector<std::string> args;
};

// The common case in one line: spawn_request("echo"), spawn_request("counter", "c1", {"5"}).
inline SpawnRequest spawn_request(std::string type_name, std::string actor_name = {},
                                  std::vector<std::string> args = {}) {
  SpawnRequest r;
  r.type_name = std::move(type_name);
  r.actor_name = std::move(actor_name);
  r.args = std::move(args);
  return r;
}

// The spawned actor: its id, name, a handle that can be messaged from any connected node, and the
// indices of the node's GPUs it was given (empty when it asked for none).
struct SpawnReply {
  std::string actor_id;
  std::string actor_name;
  caf::actor handle;
  std::vector<int32_t> gpu_ids;
};

// Spawn many actors in one message. All-or-nothing: if any item is invalid (unknown type,
// duplicate name or id, bad hex id, factory failure) none stays alive and the error names the
// item's index.
struct SpawnBatchRequest {
  std::vector<SpawnRequest> items;
};
struct SpawnBatchReply {
  std::vector<SpawnReply> items;  // in request order
};

// Find a live actor on that node by id (hex) or, when `actor_id` is empty, by name.
struct LookupRequest {
  std::string actor_id;
  std::string actor_name;
};
struct LookupReply {
  std::string actor_id;
  std::string actor_name;
  std::string type_name;
  caf::actor handle;
};

// Every live actor of a node manager (the head rebuilds its actor records from them when the GCS
// lost its data).
struct ListActorsRequest {
  uint64_t unused = 0;
};
struct LiveActor {
  std::string actor_id;
  std::string actor_name;
  std::string type_name;
  std::vector<int32_t> gpu_ids;
  caf::actor handle;
};
struct ListActorsReply {
  std::vector<LiveActor> actors;
};

// Stop a live actor (exit reason user_shutdown). The state sink then sees it DEAD with `reason`.
struct StopRequest {
  std::string actor_id;
  std::string reason;
};
struct StopReply {
  std::string actor_id;
};
// Shut the node process down (`troupe down` through the head): the node manager answers with its
// process's pid, then the process stops its actors and exits, as on SIGTERM.
struct ShutdownNode {
  std::string reason;
};
struct ShutdownNodeReply {
  int32_t pid = 0;
};
// The newest lines of the node process's own log file that contain one of `needles` (none: every
// line), reading at most `max_scan_bytes` from its end; for the dashboard's /api/logs.
struct TailLogRequest {
  std::vector<std::string> needles;
  uint64_t lines = 200;
  uint64_t max_scan_bytes = 4 << 20;
  uint64_t max_line_bytes = 2000;
};
struct TailLogReply {
  std::string file;
  std::vector<std::string> lines;  // oldest first
  bool scanned_all = true;
  uint64_t file_bytes = 0;
};

// A request to a user actor: `method` selects what to do, `payload` is its argument.
struct Call {
  std::string method;
  std::string payload;
};
struct CallReply {
  std::string payload;
};

// Many calls in one message (throughput for small calls); replies come back in the same order.
struct CallBatch {
  std::vector<Call> items;
};
struct CallBatchReply {
  std::vector<CallReply> items;
};

// A one-way message to a user actor, alone or batched.
struct Cast {
  std::string method;
  std::string payload;
};
struct CastBatch {
  std::vector<Cast> items;
};

// Liveness probe of a node manager; answered with a Heartbeat carrying the same `seq`.
struct Ping {
  uint64_t seq = 0;
};
struct Heartbeat {
  std::string node_id;        // hex
  uint64_t seq = 0;
  int64_t sent_ms = 0;        // wall clock of the node, ms since the epoch
  uint64_t live_actors = 0;   // actors this node manager spawned that are still running
};

// A lifecycle transition of an actor owned by a node manager (see gcs/records.h for the diagram):
// ALIVE after a spawn; after it exits FINISHED (returned, stopped, shut down) or DEAD (killed,
// crashed). `crashed` tells a failure (exception, error exit); `reason` says what in words. `gpu_ids`: the node's devices the actor held.
struct ActorStateChange {
  std::string actor_id;
  std::string actor_name;
  std::string type_name;
  std::string node_id;
  gcs::ActorState state = gcs::ActorState::pending;
  bool crashed = false;
  std::string reason;
  int64_t at_ms = 0;
  std::vector<int32_t> gpu_ids;
};
// The words of an ended (FINISHED or DEAD) record's death_reason that the head reads back when it saw an actor end
// without its reason (actors/job_exits.cc): a clean exit, and the prefix of a failure's message.
inline constexpr const char kExitedNormally[] = "exited normally";
inline constexpr const char kCrashedPrefix[] = "crashed: ";

// -- CAF inspection: field order is the wire format; change it only with a new wire name. --------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SpawnRequest& x) {
  return f(caf::meta::type_name("troupe.spawn_request"), x.type_name, x.actor_name, x.actor_id,
           x.gpus, x.args);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SpawnReply& x) {
  return f(caf::meta::type_name("troupe.spawn_reply"), x.actor_id, x.actor_name, x.handle, x.gpu_ids);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SpawnBatchRequest& x) {
  return f(caf::meta::type_name("troupe.spawn_batch_request"), x.items);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SpawnBatchReply& x) {
  return f(caf::meta::type_name("troupe.spawn_batch_reply"), x.items);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, LookupRequest& x) {
  return f(caf::meta::type_name("troupe.lookup_request"), x.actor_id, x.actor_name);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, LookupReply& x) {
  return f(caf::meta::type_name("troupe.lookup_reply"), x.actor_id, x.actor_name, x.type_name,
           x.handle);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ListActorsRequest& x) {
  return f(caf::meta::type_name("troupe.list_actors_request"), x.unused);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, LiveActor& x) {
  return f(caf::meta::type_name("troupe.live_actor"), x.actor_id, x.actor_name, x.type_name, x.gpu_ids, x.handle);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ListActorsReply& x) {
  return f(caf::meta::type_name("troupe.list_actors_reply"), x.actors);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StopRequest& x) {
  return f(caf::meta::type_name("troupe.stop_request"), x.actor_id, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StopReply& x) {
  return f(caf::meta::type_name("troupe.stop_reply"), x.actor_id);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ShutdownNode& x) {
  return f(caf::meta::type_name("troupe.shutdown_node"), x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ShutdownNodeReply& x) {
  return f(caf::meta::type_name("troupe.shutdown_node_reply"), x.pid);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TailLogRequest& x) {
  return f(caf::meta::type_name("troupe.tail_log_request"), x.needles, x.lines, x.max_scan_bytes, x.max_line_bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TailLogReply& x) {
  return f(caf::meta::type_name("troupe.tail_log_reply"), x.file, x.lines, x.scanned_all, x.file_bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Call& x) {
  return f(caf::meta::type_name("troupe.call"), x.method, x.payload);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CallReply& x) {
  return f(caf::meta::type_name("troupe.call_reply"), x.payload);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CallBatch& x) {
  return f(caf::meta::type_name("troupe.call_batch"), x.items);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CallBatchReply& x) {
  return f(caf::meta::type_name("troupe.call_batch_reply"), x.items);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Cast& x) {
  return f(caf::meta::type_name("troupe.cast"), x.method, x.payload);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CastBatch& x) {
  return f(caf::meta::type_name("troupe.cast_batch"), x.items);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Ping& x) {
  return f(caf::meta::type_name("troupe.ping"), x.seq);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Heartbeat& x) {
  return f(caf::meta::type_name("troupe.heartbeat"), x.node_id, x.seq, x.sent_ms, x.live_actors);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ActorStateChange& x) {
  return f(caf::meta::type_name("troupe.actor_state_change"), x.actor_id, x.actor_name,
           x.type_name, x.node_id, x.state, x.crashed, x.reason, x.at_ms, x.gpu_ids);
}

// Adds every message type above to `cfg` under its wire name. Call once per config, before the
// actor system is constructed; two processes must agree on the names to talk.
void register_message_types(caf::actor_system_config& cfg);

}  // namespace troupe::actors
