// Forming a collective group through the GCS: every member opens a TCP listener, registers its
// address under its own key, waits for the other members of the same generation, then connects the
// TCP mesh. Rank 0 also writes the group's GroupRecord (gcs "groups" table).
//
// Registration: table "group_members", key "<name>/<generation>/<rank>", value a plain text line
// "<host:port> <node hex> <actor hex>" (space separated; the ids are 32 hex digits). Each rank writes
// only its own key with put_if_absent, so ranks never race on a shared value; a key already taken
// is invalid_argument. Then it announces the generation (gcs/group_generations.h).
//
// Re-forming after a failure: the survivors call form_group again with generation + 1, the new
// world_size and ranks renumbered 0..n-1 by the caller. Keys of other generations are ignored; once
// a generation has formed, its rank 0 removes the member keys of older generations of the group.
//
//   auto comm = form_group(store, {"dp", gen, rank, world, "127.0.0.1", node, actor});
//   Status st = (*comm)->allreduce(...);
//   if (!st.ok()) { record_group_failure(store, "dp", gen, st); /* re-form at gen + 1 */ }
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "core/ids.h"
#include "core/status.h"
#include "gcs/group_generations.h"
#include "gcs/store.h"
#include "tls/tls_context.h"

namespace troupe::collectives {

constexpr const char* kGroupMembersTable = gcs::kGroupMembersTable;

struct GroupOptions {
  std::string name;            // no '/'
  int64_t generation = 0;      // >= 0, bumped by the caller on every re-formation
  int rank = 0;                // 0 <= rank < world_size
  int world_size = 0;
  std::string host = "127.0.0.1";  // address this member listens on (data plane)
  NodeId node;
  ActorId actor;
  std::chrono::milliseconds timeout{30000};  // registration + mesh connection, in all
  // auto: shm when every member is on this member's node, tcp when each is on its own node, else
  // hierarchical (see group_transport.h); or force one of "shm", "tcp", "hierarchical".
  std::string transport = "auto";
  // Per-rank zero-copy arena in shared memory (Communicator::shared_buffer) when the group uses shm
  // within the node; same on every rank.
  size_t shared_buffer_bytes = 0;
  // Set: the TCP mesh's connections are TLS, both ends authenticated by the cluster's CA.
  std::shared_ptr<const tls::TlsContext> tls = nullptr;
  // Set: while this member waits for the others, a member registered under a newer generation of
  // the group makes it give way — form_group returns unavailable ("superseded") and sets
  // *superseded_by to that generation, so the caller joins it instead of waiting for members that
  // went there (a sync job's live recovery: trainers/job/live_recovery.h).
  int64_t* superseded_by = nullptr;
};

// Registers, waits for all members of this generation and connects them; the TCP handshake admits
// only members of this name and generation. Errors: invalid_argument (bad options, the rank's key
// already taken, or a newer generation already recorded: checked by every rank before it
// registers, and by rank 0 again before it records the group), timeout
// ("group 'g' generation 3: ranks 2, 5 did not register within 30 s", or the TCP mesh's own
// timeout naming the ranks that did not connect), the store's errors.
Expected<std::unique_ptr<Communicator>> form_group(gcs::Store& store, const GroupOptions& options);

// The newest generation any member of group `name` registered under, or its manager planned
// (gcs/group_plan.h: an elastic job shrinking, where nobody new registers) (-1: none): one read of
// the group's announcement.
Expected<int64_t> newest_generation(gcs::Store& store, const std::string& name);

// Records a "group_failed" event (subject: the group name) whose message carries the generation
// and `error` (which names the missing rank and the collective's sequence number).
Status record_group_failure(gcs::Store& store, const std::string& name, int64_t generation, const Status& error);

// "<name>/<generation>/<rank>"
std::string group_member_key(const std::string& name, int64_t generation, int rank);

}  // namespace troupe::collectives
