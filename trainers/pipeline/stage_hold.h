// What a pipeline stage keeps for live recovery (issue 44; the job layer's side:
// trainers/job/pipeline_live.h). A stage applies step t + 1 only after every stage of every replica
// began step t + 1 (its passes need its neighbours' messages of that step, its all-reduce its
// replicas'), so every stage had applied t by then: when a peer is lost, the stages' states differ
// by one step at most. A stage keeps its state from before its newest update too: it can give
// either of its two newest steps, and the job agrees on one every stage holds.
#pragma once

#include <cstdint>
#include <optional>

#include "trainers/checkpoint/checkpoint.h"
#include "trainers/pipeline/stage_mirror.h"

namespace troupe::pipeline {

struct StageHold {
  bool held = false;                               // a step failed and `newest` was kept
  checkpoint::TrainingState newest;                // the stage's range after newest.step steps
  std::optional<checkpoint::TrainingState> before; // the same after newest.step - 1 steps, if kept
  MirroredStage mirror;                            // a one-replica pipeline: its buddy stage's rounds
  // With rounds K > 1 steps apart (--mirror-every K): this stage's own state at its two newest
  // rounds, so that it can roll back to the round its buddy holds of a lost stage.
  MirroredStage own;

  // The steps this stage's own states cover: [oldest, newest]; -1 each when nothing is held.
  int64_t newest_step() const { return held ? newest.step : -1; }
  int64_t oldest_step() const { return !held ? -1 : before ? before->step : newest.step; }
  // Those steps, or one of its own rounds.
  bool holds(int64_t step) const {
    return held && ((step >= oldest_step() && step <= newest_step()) || own.holds(step));
  }
  // The state of `step` (holds(step) must be true), moved out; the hold's own states are emptied.
  checkpoint::TrainingState take(int64_t step);
};

}  // namespace troupe::pipeline
