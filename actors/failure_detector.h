// The node state machine, driven by heartbeat times: a pure component with the clock passed in, so
// tests step time by hand and the cluster manager (actors/cluster_manager.h) applies its verdicts.
//
//                 silence >= suspect_after              silence >= dead_after
//   (register) --> ALIVE ------------------------> SUSPECT ------------------------> DEAD
//                    ^ |                              |                               ^
//                    | +------ silence >= dead_after (one late check) ---------------+|
//                    +-------- silence < suspect_after (heartbeat resumed) --+        |
//   ALIVE / SUSPECT ------------- connection_lost(node) --------------------------------+
//   DEAD is final for that node id: no transition leaves it (a restarted node joins with a new id).
//
// silence = now - last_heartbeat_ms (a heartbeat stamped in the future counts as silence 0). With
// the defaults (suspect 0.8 s, dead 2.0 s) and checks at the due times (next_due_ms), a node that
// stops is DEAD at most 2.0 s after its last heartbeat; one whose process exits is DEAD at once,
// from the lost connection.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/ids.h"
#include "core/status.h"
#include "gcs/records.h"

namespace troupe::actors {

struct FailureDetectorOptions {
  int64_t suspect_after_ms = 800;  // setting node_suspect_after_ms
  int64_t dead_after_ms = 2000;    // setting node_dead_after_ms

  static FailureDetectorOptions from_config(const Config& config);
  // invalid_argument unless 0 < suspect_after_ms < dead_after_ms.
  Status validate() const;
};

// One change of a node's state, with the line that explains it:
//   "no heartbeat for 0.9 s (suspect after 0.8 s)", "no heartbeat for 2.1 s (timeout 2.0 s)",
//   "heartbeat resumed (last 0.1 s ago)", "connection to node lost".
struct NodeTransition {
  NodeId node;
  gcs::NodeState from = gcs::NodeState::alive;
  gcs::NodeState to = gcs::NodeState::alive;
  std::string reason;
};

class FailureDetector {
 public:
  // Options are taken as given; validate them first (the cluster manager does).
  explicit FailureDetector(FailureDetectorOptions options) : options_(options) {}

  // The transition `node` is due at `now_ms`, if any.
  std::optional<NodeTransition> evaluate(const gcs::NodeRecord& node, int64_t now_ms) const;
  // The transitions due at `now_ms`, in the order of `nodes`.
  std::vector<NodeTransition> evaluate(const std::vector<gcs::NodeRecord>& nodes, int64_t now_ms) const;

  // The node's connection to the head dropped: DEAD at once. nullopt when it is DEAD already.
  std::optional<NodeTransition> connection_lost(const gcs::NodeRecord& node) const;

  // The earliest time after `now_ms` at which some node's next timeout falls (so the caller can
  // check exactly then); nullopt when no node is ALIVE or SUSPECT.
  std::optional<int64_t> next_due_ms(const std::vector<gcs::NodeRecord>& nodes, int64_t now_ms) const;

  const FailureDetectorOptions& options() const { return options_; }

 private:
  FailureDetectorOptions options_;
};

// "ALIVE", "SUSPECT", "DEAD" (kept here so this pure component needs no record codecs).
const char* node_state_text(gcs::NodeState s);

}  // namespace troupe::actors
