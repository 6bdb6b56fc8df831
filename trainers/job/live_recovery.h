// Live recovery of a sync job (issue 44): a lost replica is replaced from its peers' memory, and
// the job loses no completed step.
//
//   1. A peer dies (process, node, link, exception). The survivors' gradient all-reduce of step
//      s + 1 fails; nothing of that step is applied, so each keeps its state after step s
//      (trainers/sync/held_state.h) and leaves the broken group. A survivor whose all-reduce had
//      completed (the dead peer's part arrived before it died) holds step s + 1.
//   2. The job supervisor places a replacement for each dead slot only, under the next attempt
//      (actors/job_supervisor.h); it registers in the group at that generation. The survivors wait
//      for that generation to appear (await_replacements) and join it at their old ranks.
//   3. In the new group every rank says which step it holds (-1: a replacement, nothing), and the
//      lowest rank holding the newest step broadcasts its state — parameters, optimizer state,
//      step and position in the epoch — over the group's data plane (share_held_state). The
//      step in flight is trained again by everyone, on the same examples.
//   4. Rank 0 rewinds the shard ledger to that step (the replicas claim their shards again and
//      skip the steps done, as after a checkpoint restart), records the steps up to it as kept —
//      they live in every replica's memory — and says how the recovery went (live_recovered).
//
// Nobody holding any state (every worker lost at once, a cluster restart) is the old path: the
// newest checkpoint on disk, or the beginning (trainers/job/sync_recovery.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "core/ids.h"
#include "gcs/store.h"
#include "trainers/job/job_spec.h"
#include "trainers/sync/held_state.h"

namespace troupe::job {

// What the ranks of a re-formed group go on from.
struct LiveStart {
  bool live = false;                // some rank held the job's state; every rank has it now
  std::string from;                 // where it came from, when not one rank nor the mirrors (a pipeline's stages)
  checkpoint::TrainingState state;  // that state (live only)
  int source = -1;                  // the rank it came from
  int receivers = 0;                // ranks that did not hold that step (replacements, a survivor behind)
  int64_t bytes = 0;                // the state's bytes, as broadcast from the source
  int distance = 1;                 // agree_mirror_step: the buddy distance of the rounds chosen
  int from_world = 0;               // agree_mirror_step: > 0 when the rounds' group had another size or
                                    // numbering (an elastic job resized): its size (mirror_recut.h)
};

// "the memory of rank R (step S)" (or "the buddy mirrors of step S", source -1): where a live start
// came from, for logs, events and the summary.
std::string live_source(const LiveStart& live);

// A collective of the re-formed group: every rank tells the step it holds (`mine` null: none);
// when some rank holds one, the lowest rank holding the newest step broadcasts its state to all.
// Errors: the collectives' (a peer lost again), invalid_argument when the ranks' models differ.
Expected<LiveStart> share_held_state(collectives::Communicator& comm, const HeldState* mine,
                                     std::chrono::milliseconds timeout);

// The same for a sharded job (trainers/sharded/buddy_mirror.h): every rank tells the rounds of its
// buddy mirror it holds (`mine` null or empty: none), and all agree on the newest step every rank's
// chunks survive at (choose_mirror_round). live: that step (state.step; source -1, the chunks come
// from their owners or buddies when each replica starts: ReplicaState's restore); receivers = the
// ranks without their own round of it; from_world set when an elastic job's group was resized or
// renumbered since the rounds were taken (each rank's new shard then cut from the old ones). Not
// live: no round covers every chunk (an owner and its buddy both lost, every worker lost): the
// checkpoint path, and the log says why.
Expected<LiveStart> agree_mirror_step(collectives::Communicator& comm, const MirrorHold* mine,
                                      std::chrono::milliseconds timeout);

// The buddy distance of this group's mirror (choose_buddy_distance over the ranks' nodes, told by
// an all-gather): every rank's buddy on another node where the placement allows.
Expected<int> agree_buddy_distance(collectives::Communicator& comm, const NodeId& node,
                                   std::chrono::milliseconds timeout);

// A survivor's wait for its replacements: the newest generation of group `group` registered above
// `failed`, polled until `wait` passes. unavailable when `cancel` is set (the job was stopped);
// timeout naming the group and the wait (no replacement came: the survivor then fails, and the
// supervisor restarts it with the rest).
Expected<int64_t> await_replacements(gcs::Store& store, const std::string& group, int64_t failed,
                                     std::chrono::milliseconds wait, const std::atomic<bool>& cancel);

// While a live job's worker trains at generation `gen` of group `group`, watches the group for a
// newer generation (the supervisor placed a replacement for a peer it knows is lost — its node's
// heartbeats stopped, a cut link — while this worker may still wait for that peer in a collective)
// and then interrupts `transport`, so the survivor leaves the broken step at once, keeping its
// state, instead of at the collective's deadline. Polls every `every`; stops when destroyed
// (destroy it before the transport).
class GenerationWatch {
 public:
  GenerationWatch(gcs::Store& store, std::string group, int64_t gen, collectives::Transport* transport,
                  std::chrono::milliseconds every = std::chrono::milliseconds(100));
  // The same for several transports (null ones skipped): a pipeline stage's pipe and stage groups.
  GenerationWatch(gcs::Store& store, std::string group, int64_t gen, std::vector<collectives::Transport*> transports,
                  std::chrono::milliseconds every = std::chrono::milliseconds(100));
  ~GenerationWatch();
  GenerationWatch(const GenerationWatch&) = delete;
  GenerationWatch& operator=(const GenerationWatch&) = delete;

 private:
  void run();

  gcs::Store& store_;
  const std::string group_;
  const int64_t gen_;
  std::vector<collectives::Transport*> transports_;
  const std::chrono::milliseconds every_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// Step 4, on rank 0 of generation `generation` before the first step: the ledger and trained ranges
// put at live.state.step (gcs/data_accounting.h), the steps up to it recorded as kept, the event
// "job_recovered_live" and the job's recovery record (gcs/job_recovery.h) saying from which rank,
// how many bytes, and that no step was lost.
Status rewind_live(gcs::Store& store, const JobId& job, int shards, int64_t steps_per_epoch, int64_t generation,
                   const LiveStart& live);

}  // namespace troupe::job
