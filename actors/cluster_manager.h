// The head's view of node membership, kept in the GCS: admits nodes (cluster token and troupe
// version checked), records their heartbeats, and on every tick applies the failure detector to the
// nodes table — writing changed NodeRecords, recording events and marking the actors of a DEAD node
// DEAD. The node state machine is drawn in actors/failure_detector.h.
//
// Writes to the GCS, per transition, in this order:
//   node record (new state, death_reason) -> event (node_suspect, node_recovered, node_died)
//   -> for DEAD: each non-DEAD actor on the node -> DEAD (death_reason names the node) + actor_died.
// A store error stops the call and is returned (with the step that failed). No actor is left
// behind: a node whose actors were not all marked is remembered and swept again on the next tick,
// and the first tick of a new ClusterManager sweeps every DEAD node (a restarted head finishes its
// predecessor's work). An event can be missing when the store fails between a write and its event.
// Every store call is bounded by the store's own deadline. Heartbeat times are the head's clock, so
// clock skew between machines does not matter.
//
// Heartbeats never wait on the GCS: heartbeat() checks the node against what this manager last
// wrote or read of it (its state, kept in memory) and notes the time and used resources there; the
// next tick writes them, one record per node heard (and recovers a SUSPECT node then, within a
// heartbeat period). While the GCS is away the notes pile up in memory and the first tick that
// reaches it writes the newest of each: a GCS outage costs no node its place. A live node whose
// record vanished from the table (a GCS that came back empty) is written again from memory by the
// next tick, with the event gcs_refilled.
//
// After the GCS was unreachable (a tick failed on the store, or answered only after a stall), the
// first successful tick
// grants every node a full node_dead_after_ms before any is suspected. So does a tick that comes
// more than node_suspect_after_ms after the one before (the head itself was stopped or starved: it
// could not hear anyone). A node this manager has not
// heard from since it was created (a restarted head: its predecessor's nodes reconnect and
// re-register meanwhile) is timed from the manager's creation, not from its last recorded heartbeat.
//
// Thread-safe: register_node, on_connection_lost and tick are serialised by one mutex, held across
// their store calls; heartbeat takes only a second one, never held across a store call (the head
// takes heartbeats on their own actor, and ticks on its main thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/failure_detector.h"
#include "core/config.h"
#include "gcs/records.h"
#include "gcs/store.h"

namespace troupe::actors {

struct ClusterManagerOptions {
  std::string cluster_token;          // the secret nodes must present; required (non-empty)
  std::string version;                // this head's troupe version; nodes must match it exactly
  FailureDetectorOptions detector;
  int64_t heartbeat_period_ms = 200;  // setting heartbeat_period_ms; the tick period too
  std::function<int64_t()> clock;     // wall clock in ms; empty: gcs::now_ms (tests inject one)
  // The head's monotonic clock in ms, timing the gap between ticks; empty: steady_clock (tests
  // inject one to stop the head).
  std::function<int64_t()> monotonic;
  // The head's own node, whose heartbeat the head sends through its service every tick like the
  // nodes' arrive there. When the service has not taken it for two heartbeat periods (at most half
  // of node_suspect_after_ms), the service is busy (a blocking call) and the nodes' heartbeats wait
  // in its mailbox behind it: no node is suspected while it lasts, nor for node_suspect_after_ms
  // once it is heard again (the mailbox drains in order, the nodes' waiting heartbeats first).
  std::optional<NodeId> self;

  // Detector settings and heartbeat period from the config; version = TROUPE_VERSION_STRING.
  static ClusterManagerOptions from_config(const Config& config, std::string cluster_token);
  // invalid_argument: empty token or version, bad detector settings, or a heartbeat period that is
  // not below node_suspect_after_ms (a healthy node would be suspected between two heartbeats).
  Status validate() const;
};

// What one tick did.
struct TickReport {
  std::vector<NodeTransition> transitions;  // applied, in node id order
  int actors_marked_dead = 0;
  int64_t next_tick_ms = 0;  // when to tick again: the next timeout due, at most a heartbeat period away
};

class ClusterManager {
 public:
  // invalid_argument when options do not validate. The store must outlive the manager.
  static Expected<std::unique_ptr<ClusterManager>> create(gcs::Store& store, ClusterManagerOptions options);

  // Admits a node: checks `token` against the cluster's, `version` against the head's, then stores
  // the record ALIVE with last_heartbeat_ms = now (and started_ms = now when 0) and records
  // node_joined. A node id already registered and not DEAD re-registers (a reconnect).
  // Refusals, each logged as a warning on the head:
  //   wrong token       -> invalid_argument ("... presented a wrong cluster token ..."; neither
  //                        token appears in the message or the log)
  //   other version     -> version_mismatch naming both versions
  //   id declared DEAD  -> invalid_argument (restart the node: it joins with a new id)
  //   nil id, negative or NaN totals -> invalid_argument
  // Store errors are returned as they come (unavailable, timeout, ...).
  Status register_node(gcs::NodeRecord node, const std::string& token, const std::string& version);

  // Takes a heartbeat, in memory only (never waits on the GCS): the next tick records
  // last_heartbeat_ms = now and `used`, and brings a SUSPECT node back (node_recovered). not_found
  // for a node this manager neither registered nor read from the table (taken while it has not
  // read the table yet: a GCS that was down at its creation); invalid_argument for a DEAD one (the
  // node must stop: its actors were declared dead) or bad resources.
  Status heartbeat(const NodeId& node, const gcs::Resources& used);
  // The same without resources: those the head service last noted (note_used) are recorded.
  Status heartbeat(const NodeId& node);
  // The resources in use on every node as the head service counts them (it places the actors);
  // memory only, like heartbeats.
  void note_used(const std::map<NodeId, gcs::Resources>& used);

  // The node's connection dropped: DEAD now, with its actors. not_found for an unknown node; ok and
  // nothing done when it is DEAD already.
  Status on_connection_lost(const NodeId& node);

  // Applies the failure detector to every node at `now_ms` and sweeps the actors of DEAD nodes.
  Expected<TickReport> tick(int64_t now_ms);
  Expected<TickReport> tick() { return tick(now()); }

  const ClusterManagerOptions& options() const { return options_; }

 private:
  ClusterManager(gcs::Store& store, ClusterManagerOptions options);
  int64_t now() const;
  // Writes the transition, records its event and, for DEAD, sweeps the node's actors.
  Status apply(gcs::NodeRecord node, const NodeTransition& t, int64_t now_ms, int* actors_marked);
  Status take_heartbeat(const NodeId& node, const gcs::Resources* used);
  // Remembers `node` as written or read (under heard_mu_).
  void remember(const gcs::NodeRecord& node);
  // Writes back the live nodes this manager knows that `listed` lacks (the GCS lost them).
  Status refill(std::vector<gcs::NodeRecord>* listed, int64_t now_ms);
  // Marks every non-DEAD actor on `node` DEAD; on success forgets the node in unswept_.
  Status sweep_actors(const gcs::NodeRecord& node, int64_t now_ms, int* actors_marked);

  gcs::Store& store_;
  ClusterManagerOptions options_;
  FailureDetector detector_;
  std::mutex mu_;
  bool swept_at_start_ = false;
  std::set<NodeId> unswept_;  // DEAD nodes whose actors may not all be marked yet
  bool store_outage_ = false;   // a store call failed since the last successful tick
  int64_t last_tick_ms_ = 0;    // when the last tick began (a long gap: the head itself stalled)
  bool service_stalled_ = false;  // the head's own heartbeat is overdue (see options.self)
  int64_t grace_until_ms_ = 0;  // after an outage, no node is suspected before this time
  int64_t created_ms_ = 0;      // nodes not heard since are timed from here (a restarted head)
  // What heartbeats read and write, under their own lock (a tick holds mu_ across store calls):
  // when the head last received each node's heartbeat and the used resources it carried (written
  // by the next tick), and each node's record as last written or read (its state answers them).
  std::mutex heard_mu_;
  std::map<NodeId, int64_t> heard_ms_;
  std::map<NodeId, gcs::Resources> used_;
  std::map<NodeId, gcs::NodeRecord> known_;
  bool table_read_ = false;  // known_ holds the nodes table (read at creation or by a tick)
};

}  // namespace troupe::actors
