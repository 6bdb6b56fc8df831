// Live recovery of a pipeline job (issue 44): a lost stage is replaced and takes its layers' state
// from the same stage of another replica, from memory; the other workers keep theirs.
//
//   1. Each stage keeps its state from before its newest update too (trainers/pipeline/stage_hold.h).
//      A lost peer leaves every survivor holding its stage's state after step s or s + 1 (never
//      further apart: a stage applies s + 1 only once every stage of every replica began s + 1 —
//      its passes need its neighbours' messages, its all-reduce its replicas' — so all had applied s).
//   2. In the re-formed generation every worker joins the job's group "job-<id>" (all workers,
//      rank = index) besides its pipe and stage groups, and tells which steps it can give. The job
//      goes on from the newest step every stage holds somewhere: the least over the stages of the
//      newest step each stage holds.
//   3. In each stage's group the lowest replica holding that step sends it to the others
//      (share_held_state); the step in flight is trained again by everyone, on the same examples.
//
// A pipeline of one replica has no other replica of a stage: each stage mirrors its state to a buddy
// stage (trainers/pipeline/stage_mirror.h), and a lost stage's state comes from that copy, over the
// job's group. A stage whose state survives nowhere (every replica of it lost, with its buddy's
// copy) is the checkpoint path, and the log says which stage.
#pragma once

#include <chrono>

#include "collectives/communicator.h"
#include "trainers/job/live_recovery.h"
#include "trainers/pipeline/stage_hold.h"

namespace troupe::job {

// What each worker can give: the steps [oldest, newest] its stage's hold covers (-1: none) and its
// own mirror rounds (--mirror-every K > 1; -1: none), and the rounds it keeps of the stage it
// mirrors (mirror_stage -1: none). Rounds are exact steps: K apart, nothing between.
struct StageOffer {
  int stage = 0;
  int64_t oldest = -1, newest = -1;
  int mirror_stage = -1;
  int64_t mirror_older = -1, mirror_newest = -1;
  int64_t own_older = -1, own_newest = -1;
  bool holds(int64_t step) const {
    return step >= 0 && ((oldest >= 0 && oldest <= step && step <= newest) || step == own_older || step == own_newest);
  }
  bool mirrors(int s, int64_t step) const {
    return mirror_stage == s && step >= 0 && (step == mirror_older || step == mirror_newest);
  }
};

// Step 2's choice: the newest step every stage can give (the stages' own holders and the workers
// mirroring each both count), or -1 (with the reason in *why) when there is none: some stage's
// state survives nowhere, or no step is common to all.
int64_t choose_pipeline_step(const std::vector<StageOffer>& offers, int stages, std::string* why);

// Steps 2 and 3, a collective of `job` (every worker) and `stage_group` (this stage's replicas; null
// for one replica); a stage none of whose workers holds the step takes it from the lowest worker
// mirroring it, over `job`. `hold` is emptied. live: this stage's state of the agreed step in state, `from`
// naming where it came from, bytes the state bytes the stages' sources sent (summed over the
// stages), receivers the workers that did not hold that step. Not live: nobody held anything, or a
// stage's state survives nowhere (logged).
Expected<LiveStart> agree_stage_state(collectives::Communicator& job, collectives::Communicator* stage_group,
                                      int stage, int stages, pipeline::StageHold& hold,
                                      std::chrono::milliseconds timeout);

}  // namespace troupe::job
