// What a sync replica keeps when a step's collective fails (live recovery, issue 44): its
// parameters and optimizer state as they were after the last step it completed — a failed step
// applies nothing, so they are intact — with that step's position. The job layer then re-forms
// the group with a replacement for the lost replica and hands this state on to it
// (trainers/job/live_recovery.h) instead of restarting everyone from a checkpoint on disk.
#pragma once

#include <string>

#include "core/status.h"
#include "trainers/checkpoint/checkpoint.h"

namespace troupe {

class ReplicaState;

struct HeldState {
  bool held = false;               // a step's collective failed and `state` was kept
  checkpoint::TrainingState state; // after `state.step` global steps: epoch, steps of it, params, optimizer
  Status cause;                    // why the step failed (a peer lost, naming it)
};

// Keeps `state`'s whole parameters and optimizer state in `out`, at global step `step` (steps
// completed), `epoch_step` steps into `epoch`, with the failure `cause`. Only for replicas that
// hold every parameter (no --shard): invalid_argument otherwise (the caller then fails as before).
Status hold_state(ReplicaState& state, int64_t step, int epoch, int64_t epoch_step, const Status& cause,
                  HeldState* out);

}  // namespace troupe
