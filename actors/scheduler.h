// Actor placement as a pure function object: given the cluster view (nodes with total and used
// resources) and a batch of requests, decide which node each actor goes to, or say precisely why it
// stays PENDING. Nothing here talks to the GCS or the network; the head reads the view from the
// nodes table, calls schedule(), and writes the placements.
//
// Rules, in the order they apply:
//   - Only ALIVE nodes are chosen. SUSPECT and DEAD nodes keep their place in the view but receive
//     nothing (a SUSPECT node may be gone; placing on it would strand the actor).
//   - A request fits a node when every demand (cpus, gpus, memory) is at most the node's free amount
//     (total - used), with a tolerance of 1e-9 for fractional cpus and gpus.
//   - A pinned request goes to its node or nowhere.
//   - A request that needs no GPU prefers nodes without GPUs, so GPU nodes stay free for GPU work;
//     it uses a GPU node only when no CPU-only node fits.
//   - PACK: the most-loaded node that fits (fill nodes one by one, leaving whole nodes free).
//     SPREAD: the least-loaded node that fits.
//     Load is a node's critical utilisation: the largest of used/total over the kinds of resource
//     the node has (cpus, gpus, memory).
//   - Ties are broken by node id (ascending) under PACK. Under SPREAD, among equally loaded nodes the
//     first one after the node this scheduler placed on last (in id order, wrapping around) wins, so
//     zero-demand actors and identical empty nodes take turns (round-robin).
//   - Requests are served in the order given. All requests sharing a `group` form a gang that is
//     placed at the position of its first member: all of its members are placed, or none (a partial
//     placement is rolled back and the view is left as it was). A gang must be submitted whole in one
//     call; "of N" in messages counts its members in that call.
// Determinism: the same scheduler state (its last SPREAD node), view and requests give the same
// result, whatever order the nodes are listed in (they are sorted by id first).
//
// Cost: O(requests x nodes); 10,000 requests over 100 nodes take a few milliseconds.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/records.h"

namespace troupe::actors {

enum class PlacementPolicy : uint8_t { pack, spread };
const char* placement_policy_name(PlacementPolicy p);  // "pack", "spread"
// Parses "pack" or "spread" (the scheduler_policy setting); anything else is invalid_argument.
Expected<PlacementPolicy> parse_placement_policy(const std::string& text);

// One node as the scheduler sees it.
struct NodeView {
  NodeId id;
  gcs::NodeState state = gcs::NodeState::alive;
  gcs::Resources total, used;
};
// The view of a nodes table (every node, whatever its state).
std::vector<NodeView> node_views(const std::vector<gcs::NodeRecord>& nodes);

struct PlacementRequest {
  ActorId actor;
  gcs::Resources demand;              // cpus, gpus, memory_bytes; each >= 0 and finite
  std::optional<NodeId> pinned_node;  // place only there
  std::optional<NodeId> avoid_node;   // place anywhere but there
  std::string group;                  // gang id: all members placed or none; empty: alone
};

struct Placement {
  ActorId actor;
  NodeId node;
};

// A request left PENDING and why, in one line for `troupe status` and the actor's pending_reason:
//   "needs 2 gpus; largest free on an alive node is 1 (node 3fa2c1d0)"
//   "gang 'trainers' of 8 needs 8 cpus; 6 free across 3 alive nodes"
//   "pinned node 3fa2c1d0 is DEAD"
struct Unplaced {
  ActorId actor;
  std::string group;
  std::string reason;
};

struct ScheduleResult {
  std::vector<Placement> placements;  // in request order (a gang's members together)
  std::vector<Unplaced> pending;      // in request order
  std::vector<NodeView> nodes;        // the view sorted by id, `used` including the placements
};

struct SchedulerOptions {
  PlacementPolicy policy = PlacementPolicy::spread;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options = {}) : options_(options) {}

  // Places what fits. invalid_argument, placing nothing, when a demand is negative, NaN or
  // infinite, an actor id is nil or repeated, or a node id is repeated in the view.
  Expected<ScheduleResult> schedule(const std::vector<NodeView>& nodes,
                                    const std::vector<PlacementRequest>& requests);

  const SchedulerOptions& options() const { return options_; }

 private:
  SchedulerOptions options_;
  NodeId last_spread_node_;  // where SPREAD's round-robin among equals resumes
};

// "2 cpus, 1 gpu, 4.0 GiB" (zero amounts left out; "nothing" when all are zero).
std::string describe_resources(const gcs::Resources& r);

}  // namespace troupe::actors
