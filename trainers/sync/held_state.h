// What a sync replica keeps when a step's collective fails (live recovery, issue 44): its
// parameters and optimizer state as they were after the last step it completed — a failed step
// applies nothing, so they are intact — with that step's position. The job layer then re-forms
// the group with a replacement for the lost replica and hands this state on to it
// (trainers/job/live_recovery.h) instead of restarting everyone from a checkpoint on disk.
#pragma once

#include <string>

#include "core/status.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/sharded/buddy_mirror.h"

namespace troupe {

class ReplicaState;

struct HeldState {
  bool held = false;               // a step's collective failed and `state` (or `mirror`) was kept
  checkpoint::TrainingState state; // after `state.step` global steps: epoch, steps of it, params, optimizer
  // --shard: the buddy mirror's rounds instead of `state` (whose step is then the newest round's).
  MirrorHold mirror;
  bool sharded() const { return mirror.any(); }
};

// Keeps `state`'s whole parameters and optimizer state in `out`, at global step `step` (steps
// completed), `epoch_step` steps into `epoch`. Only for replicas that hold every parameter (no
// --shard: their buddy mirror is kept instead): invalid_argument otherwise.
Status hold_state(ReplicaState& state, int64_t step, int epoch, int64_t epoch_step, HeldState* out);
// A sharded replica's rounds kept in `out`.
void hold_mirror(MirrorHold rounds, HeldState* out);

}  // namespace troupe
