// A sharded elastic job's state taken again from the buddy mirrors when its group changed size
// (live recovery, issue 44). The mirrors' records are laid out for the group that took them: rank
// j of W owns its chunks of every bucket (ShardedState::owned_ranges_of(j, W)). The new group of N'
// ranks — survivors renumbered by the generation's plan, and newcomers holding nothing — lays the
// same floats out as N' chunks per bucket. So each old rank's record is broadcast once, from a
// survivor holding it (its owner, else the rank holding its buddy copy), and every rank copies
// from it the floats its new chunks cover; the whole parameters too where the stage keeps them
// whole. No rank holds more of the optimizer state than its new share and one record at a time.
#pragma once

#include <chrono>

#include "collectives/communicator.h"
#include "core/status.h"
#include "trainers/sharded/buddy_mirror.h"
#include "trainers/sharded/sharded_state.h"

namespace troupe {

// Collective (every rank of the new group): round `at.step` of a group of `at.from_world` ranks
// loaded into `zero` (laid out for `comm`) and `params`, the flat parameters: `whole_params`
// (--shard optimizer|gradients) every float of them, else (--shard parameters) this rank's chunks,
// in `zero`. at.hold: this rank's rounds (null or empty for a newcomer). bytes: the records'
// bytes the ranks received in all. internal when no rank offers an old rank's record (a bug: the
// choice said it survives) or a record is not of the step.
Expected<MirrorStart> restore_recut(collectives::Communicator& comm, ShardedState& zero, bool whole_params,
                                    float* params, const MirrorResume& at, std::chrono::milliseconds timeout);

}  // namespace troupe
