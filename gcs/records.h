// The records of the global control store, one struct per table, encoded as msgpack with a schema
// version first. A record of another schema version is refused (version_mismatch, naming both);
// malformed bytes are corrupt_data naming the table and key. The state machines of nodes and actors
// are drawn here, next to the states they move through.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace troupe::gcs {

// Bumped whenever any record's layout changes (2: ShardRecord gained examples, progress, claims;
// 3: JobRecord gained the job's spec, its actors, live progress and the result; 4: ShardRecord
// gained resume_at; 5: PsAppliedRecord gained restored_record and replayed; 6: ActorRecord gained
// gpu_ids).
constexpr uint32_t kRecordSchemaVersion = 6;

struct Resources {
  double cpus = 0;
  double gpus = 0;
  int64_t memory_bytes = 0;
};

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;
};

// Node lifecycle (the cluster manager drives it from heartbeats and connections):
//
//   (register) --> ALIVE --(no heartbeat for suspect_after)--> SUSPECT --(timeout)--> DEAD
//                    ^                                            |
//                    +-------------(heartbeat again)--------------+
//   ALIVE/SUSPECT --(connection dropped, or process exit)--> DEAD      DEAD is final for that node id.
enum class NodeState : uint8_t { alive = 0, suspect = 1, dead = 2 };
const char* node_state_name(NodeState s);  // "ALIVE", "SUSPECT", "DEAD"

struct NodeRecord {
  NodeId id;
  std::string address;        // host:port of the node's actor system (CAF middleman)
  std::string hostname;
  int pid = 0;
  bool is_head = false;
  std::string version;        // troupe build version (TROUPE_VERSION_STRING)
  Resources total, used;
  std::vector<GpuInfo> gpus;
  NodeState state = NodeState::alive;
  int64_t started_ms = 0;     // wall clock, ms since the epoch
  int64_t last_heartbeat_ms = 0;
  std::string death_reason;   // set when DEAD
};

// Actor lifecycle:
//
//   (spawn request) --> PENDING --(placed and started)--> ALIVE --(crash, node dead)--> RESTARTING
//        |  (reason says why it cannot be placed)            |                              |
//        |                                                    +--(exited normally, stopped,
//        |                                                    |   shut down)-------------> FINISHED
//        |                                                    +--(crashed, killed, its node
//        |                                                    |   lost, budget spent)-----> DEAD
//        +----(never placed: cancelled, its job ended, superseded)------------------------> DEAD
//   RESTARTING --(started again)--> ALIVE
// FINISHED and DEAD are final ("ended"): FINISHED is an actor that ended without failing, DEAD one
// that failed or never ran. The GCS keeps the newest `ended_actors_kept` ended records
// (gcs/actor_retention.h); older ones are removed by the head.
enum class ActorState : uint8_t { pending = 0, alive = 1, restarting = 2, dead = 3, finished = 4 };
const char* actor_state_name(ActorState s);  // "PENDING", "ALIVE", "RESTARTING", "DEAD", "FINISHED"
inline bool actor_ended(ActorState s) { return s == ActorState::dead || s == ActorState::finished; }

struct ActorRecord {
  ActorId id;
  std::string type_name;      // registered actor type
  std::string name;           // optional unique name to find it by
  JobId job;                  // nil when not part of a job
  NodeId node;                // nil while PENDING
  ActorState state = ActorState::pending;
  int restarts = 0;
  Resources resources;        // demand
  std::string pending_reason; // why it is not placed (PENDING only)
  std::string death_reason;   // how it ended (FINISHED or DEAD)
  int64_t updated_ms = 0;
  std::vector<int> gpu_ids;   // its node's devices it was given (actors/gpu_assignment.h); kept when it ends
};

enum class JobState : uint8_t { pending = 0, running = 1, succeeded = 2, failed = 3, cancelled = 4 };
const char* job_state_name(JobState s);

// A training job (`troupe submit`). Written by the submitter (PENDING, with the spec), the head's
// job supervisor (RUNNING once its actors are placed, FAILED, CANCELLED) and the job's rank-0
// worker (progress; SUCCEEDED with the result). Every write after the first is a compare-and-set of
// the whole record (gcs/job_table.h), so these writers never undo each other.
//
//   PENDING --(all actors placed and started)--> RUNNING --(rank 0 done)--> SUCCEEDED
//      |                                            +--(an actor failed)---> FAILED
//      +--(troupe stop)--> CANCELLED <--(troupe stop)--+
struct JobRecord {
  JobId id;
  std::string name;
  std::string strategy;       // local, sync, async, central
  JobState state = JobState::pending;
  int workers = 0;
  int64_t submitted_ms = 0;
  int64_t finished_ms = 0;
  double progress = 0;        // 0..1
  std::string message;        // last status line or failure reason
  int ps = 0;                 // parameter-server actors (async)
  std::vector<std::string> spec;    // the job's settings, "key=value" (trainers/job/job_spec.h)
  std::vector<std::string> actors;  // hex ids of its actors: workers in rank order, then servers
  int epoch = 0;              // progress of the running job, written by rank 0
  int epochs = 0;
  int64_t step = 0;           // steps done, of `steps` in the whole job
  int64_t steps = 0;
  double loss = 0;            // running mean loss of the current epoch
  double samples_per_second = 0;
  double eta_seconds = 0;
  double test_accuracy = -1;  // after the last evaluated epoch; -1 before
  std::string result;         // the JSON summary, once SUCCEEDED
  int64_t updated_ms = 0;
};

struct GroupMember {
  int rank = 0;
  NodeId node;
  ActorId actor;
  std::string address;        // data-plane address (host:port)
};

struct GroupRecord {
  std::string name;
  int64_t generation = 0;     // bumped on every re-formation
  int world_size = 0;
  std::vector<GroupMember> members;
  std::string nccl_id;        // bytes of the NCCL unique id for GPU groups (may be empty)
};

// Shard lifecycle, one record per (job, epoch, shard); data/shards/shard_ledger.h moves it, every
// move a compare-and-set so racing workers and the supervisor never both win:
//
//   (supervisor creates the epoch) --> UNASSIGNED --(claimed: owner set, progress = resume_at)--> ASSIGNED
//                                          ^                                                         |
//                                          +--(release_worker: owner presumed dead; progress kept,   |
//                                              resume_at 0, or where the servers applied up to)------+
//   ASSIGNED --(the owner completes it: progress = examples)--> DONE      DONE is final for that epoch (but
//   for ShardLedger::reopen: an async job that lost every server's copy of a completed shard's tail).
enum class ShardState : uint8_t { unassigned = 0, assigned = 1, done = 2 };
const char* shard_state_name(ShardState s);  // "UNASSIGNED", "ASSIGNED", "DONE"

struct ShardRecord {
  JobId job;
  int epoch = 0;
  int shard = 0;
  ShardState state = ShardState::unassigned;
  WorkerId owner;             // nil unless ASSIGNED or DONE
  int64_t examples = 0;       // examples in the shard
  int64_t progress = 0;       // examples the owner reported done; kept when released (information)
  int claims = 0;             // times claimed; more than 1 means it was released and taken again
  int64_t updated_ms = 0;
  // Where the next claim starts: 0, or (an async job's) the examples the parameter servers applied
  // before its owner died (ShardLedger::release_worker with resume offsets).
  int64_t resume_at = 0;
};

struct CheckpointShard {
  std::string path;
  uint64_t bytes = 0;
  std::string checksum;       // xxh64, hex
};

struct CheckpointRecord {
  JobId job;
  int64_t step = 0;
  std::string dir;
  std::vector<CheckpointShard> shards;
  int64_t written_ms = 0;
};

// A user's trainer library shipped through the GCS (trainers/library/trainer_library_store.h). Its bytes are
// stored under the same key in table "trainer_library_blobs"; this record is written after them, so a
// record always has its bytes.
struct TrainerLibraryRecord {
  std::string checksum;       // xxh64 of the bytes, 16 hex digits; the key
  std::string file_name;      // "libuser_trainer.so", as submitted (errors and the node's cache name it)
  std::string troupe_version; // the troupe it was built against
  int abi = 0;                // its TROUPE_TRAINER_ABI
  uint64_t size = 0;          // bytes
  std::vector<std::string> trainers;  // the names it registers
  int64_t stored_ms = 0;
};

// Encoding: [kRecordSchemaVersion, field, field, ...] as a msgpack array, fields in declaration
// order, nested structs as arrays of their fields, ids as 16-byte bins, enums as unsigned integers.
// decode refuses another schema version (version_mismatch: "node record of schema version 7; this
// troupe reads schema version 2 — upgrade troupe or clear the GCS") and malformed bytes (truncated,
// wrong types, wrong field counts, unknown enum values, trailing bytes: corrupt_data naming the
// field), never throwing. On error `*out` is unchanged.
std::string encode(const NodeRecord& r);
std::string encode(const ActorRecord& r);
std::string encode(const JobRecord& r);
std::string encode(const GroupRecord& r);
std::string encode(const ShardRecord& r);
std::string encode(const CheckpointRecord& r);
std::string encode(const TrainerLibraryRecord& r);
Status decode(const std::string& bytes, NodeRecord* out);
Status decode(const std::string& bytes, ActorRecord* out);
Status decode(const std::string& bytes, JobRecord* out);
Status decode(const std::string& bytes, GroupRecord* out);
Status decode(const std::string& bytes, ShardRecord* out);
Status decode(const std::string& bytes, CheckpointRecord* out);
Status decode(const std::string& bytes, TrainerLibraryRecord* out);

// The key and table name each record is stored under.
std::string record_key(const NodeRecord& r);        // node id hex
std::string record_key(const ActorRecord& r);       // actor id hex
std::string record_key(const JobRecord& r);         // job id hex
std::string record_key(const GroupRecord& r);       // group name
std::string record_key(const ShardRecord& r);       // "<job>/<epoch>/<shard>"
std::string record_key(const CheckpointRecord& r);  // "<job>/<step>"
std::string record_key(const TrainerLibraryRecord& r);  // checksum
template <class R> struct TableName;
template <> struct TableName<NodeRecord> { static constexpr const char* value = "nodes"; };
template <> struct TableName<ActorRecord> { static constexpr const char* value = "actors"; };
template <> struct TableName<JobRecord> { static constexpr const char* value = "jobs"; };
template <> struct TableName<GroupRecord> { static constexpr const char* value = "groups"; };
template <> struct TableName<ShardRecord> { static constexpr const char* value = "shards"; };
template <> struct TableName<CheckpointRecord> { static constexpr const char* value = "checkpoints"; };
template <> struct TableName<TrainerLibraryRecord> { static constexpr const char* value = "trainer_libraries"; };

}  // namespace troupe::gcs
