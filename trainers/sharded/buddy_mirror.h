// The buddy mirror of a sharded sync replica (live recovery, issue 44). Under --shard a replica's
// chunks of the optimizer state — and, --shard parameters, of the parameters — exist nowhere
// else, so a lost replica would take them with it. Each rank r therefore keeps a copy of rank
// r-d's chunks (its buddy's, around the ring; d = 1, or the distance that puts every buddy on
// another node: choose_buddy_distance), refreshed every `every` steps: a "round" copies this
// rank's own chunks (parameters, then each optimizer vector, with the step, the position in the
// epoch and the optimizer's step count) and shifts them to rank r+d while receiving r-d's
// (Communicator::shift). A job whose replica dies then comes back from memory: each chunk from its
// owner if it survived, else from its buddy (restore_from_mirror), and the replicas of the
// stages that hold whole parameters gather them again.
//
// Which rounds are whole. A round of step s may be cut short by the failure (some rank received
// its buddy's chunks, another did not). Each step has collectives that need every rank, so a rank
// that took round s + K has seen every rank finish round s: a mirror keeps the newest round
// (perhaps partial) and the one before it (then known whole everywhere). At recovery the ranks
// tell each other the rounds they hold and go on from the newest one every chunk of which
// survives (choose_mirror_round); none: the checkpoint on disk, or the beginning.
//
// Memory: per round 2 x (1 + vectors) x the owned floats (own + buddy), two rounds kept. Adam,
// N ranks: 24/N bytes a parameter per round, 48/N with the round before.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "core/status.h"
#include "trainers/sharded/sharded_state.h"

namespace troupe {

// One round of a rank: its own chunks' record and the record of rank r-1 it received.
struct MirrorRound {
  int64_t step = -1;             // global steps completed when it was taken; -1: no round
  bool mirrored = false;         // `buddy` holds rank r-1's record of this round
  std::vector<float> own;        // this rank's record (header, parameters, optimizer vectors)
  std::vector<float> buddy;      // rank r-1's record, as it was sent
};

// What a rank holds for recovery: the round before (whole) and the newest (maybe partial).
struct MirrorHold {
  MirrorRound older, newest;
  int distance = 1;  // the rounds' buddy distance: `buddy` is rank r-distance's
  int rank = -1;     // this rank's number in the group the rounds were taken in, and that group's size
  int world = 0;
  bool any() const { return older.step >= 0 || newest.step >= 0; }
  const MirrorRound* round_of(int64_t step) const;  // the round of `step`, or null
};

// What one rank tells the others at recovery (-1 steps for none), and the choice made from every
// rank's report, in rank order: the newest step every rank's chunks survive at — rank j's own
// round of it, or the round of it with the mirror received of a rank k whose buddy is j
// (k - distance_k = j). -1 when none. The ranks are those of the group the rounds were taken in
// (`rank` and `world`; -1 and 0: the reporter's position and the reports' count), which an
// elastic job's new group may renumber and resize.
struct MirrorReport {
  int64_t older = -1, newest = -1;
  bool older_mirrored = false, newest_mirrored = false;
  int distance = 1;
  int rank = -1, world = 0;
  bool holds(int64_t step) const { return step >= 0 && (older == step || newest == step); }
  bool mirrors(int64_t step) const {
    return step >= 0 && ((older == step && older_mirrored) || (newest == step && newest_mirrored));
  }
};
MirrorReport report_of(const MirrorHold& hold);
struct MirrorChoice {
  int64_t step = -1;        // the round every chunk survives at; -1: none
  int world = 0;            // the size of the group it was taken in
  bool same_layout = true;  // the new group is that group, rank for rank (else: mirror_recut.h)
};
MirrorChoice choose_mirror_round(const std::vector<MirrorReport>& ranks);
inline int64_t choose_mirror_step(const std::vector<MirrorReport>& ranks) { return choose_mirror_round(ranks).step; }
// The buddy distance for ranks on nodes `node_of_rank` (any ids): the smallest d in 1..n-1 with
// every rank r's buddy r-d on another node than r, so a node's loss never takes a shard's owner and
// its copy at once; 1 when there is none (every rank on one node, or a node with over half).
int choose_buddy_distance(const std::vector<int64_t>& node_of_rank);

// Where a restored replica stands.
struct MirrorStart {
  int64_t step = 0;
  int epoch = 1;
  int64_t epoch_step = 0;
  int64_t bytes = 0;  // of the records the ranks without their own round received, all ranks'
};

// Overlapped (given a communicator of its own: a second group of the same ranks), a round's shift
// runs on the mirror's thread while the next step computes; the replica waits for it (wait())
// before that step's first collective, so every step's collectives still prove the round before
// finished on every rank, as when it runs in line.
class BuddyMirror {
 public:
  // The mirror of `zero`'s chunks over `comm` (the replica's group), a round every `every` steps,
  // each rank's sent to rank + distance; `own` (null: in line on `comm`) the group its shifts use.
  BuddyMirror(collectives::Communicator& comm, ShardedState& zero, int64_t every, int distance,
              std::chrono::milliseconds timeout, collectives::Communicator* own = nullptr);
  ~BuddyMirror();
  BuddyMirror(const BuddyMirror&) = delete;
  BuddyMirror& operator=(const BuddyMirror&) = delete;

  // After `step` global steps (the update applied on every rank), `epoch_step` steps into `epoch`;
  // `params` the flat parameters (this rank's chunks hold its values). Takes a round when one is
  // due (every `every`-th step, and the first call: the start): the copy now, the shift now or, with
  // a group of its own, started on the mirror's thread. Errors: the shift's (a peer lost).
  Status after_step(const float* params, int64_t step, int epoch, int64_t epoch_step);
  // Until the round's shift in flight (if any) is over: its error, if it failed. Any thread.
  Status wait();
  bool overlapped() const { return own_ != nullptr; }
  // The rounds, handed over for live recovery, once the shift in flight is over (the mirror is
  // empty after).
  MirrorHold release();

 private:
  void write_own(MirrorRound& round, const float* params, int64_t step, int epoch, int64_t epoch_step);
  Status shift_newest(collectives::Communicator& comm);  // the newest round's own record out, the buddy's in
  void run();  // the mirror's thread (overlapped)

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool posted_ = false, stop_ = false;  // guarded by mu_
  Status shifted_;                      // the last shift's outcome, guarded by mu_

  collectives::Communicator& comm_;
  ShardedState& zero_;
  const int64_t every_;
  const int distance_;
  const std::chrono::milliseconds timeout_;
  collectives::Communicator* const own_;  // overlapped: the second group the thread shifts over
  size_t record_floats_ = 0;  // every rank's record padded to the largest (rank 0's)
  MirrorHold hold_;
  bool started_ = false;
};

// Where a sharded replica starts from the mirrors (Replica::mirror): this rank's rounds (empty for
// a replacement), the step agreed and the rounds' distance; `restored`, if set, hears the bytes.
struct MirrorResume {
  const MirrorHold* hold = nullptr;
  int64_t step = -1;
  int distance = 1;
  int from_world = 0;  // > 0: the round was taken by a group of this size or numbering (restore_recut)
  std::function<void(int64_t bytes)> restored;
};

// Collective (every rank of the re-formed group, same ranks as before): the state of round
// `at.step` loaded into `zero` and `params`, the flat parameters: `whole_params` (--shard
// optimizer|gradients) all of them again after, gathered; else (--shard parameters) only this
// rank's chunks, in `zero`. A rank without its own round of the step (a replacement) takes its
// record from rank r+distance's mirror (a shift backwards). internal when a record is not of the
// step (a bug: the choice said it survives).
Expected<MirrorStart> restore_from_mirror(collectives::Communicator& comm, ShardedState& zero, bool whole_params,
                                          float* params, const MirrorResume& at, std::chrono::milliseconds timeout);

}  // namespace troupe
