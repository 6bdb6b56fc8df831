// What a sync replica does after a step's update, on the steps it is due: compare a checksum of its
// parameters with every other replica's (Replica::checksum_every), and write its shard of a
// checkpoint (Replica::checkpoints.every), rank 0 committing the manifest once every shard is
// durable (trainers/checkpoint/collective_write.h). Both are collective: every replica is due alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainers/sync/replica_state.h"
#include "trainers/sync/trainer_driver.h"

namespace troupe {

// Every replica's parameter checksum (xxh64) gathered; internal_error naming the first replica that
// differs from rank 0's, at `step`. Errors of the collective.
Status compare_checksums(const std::vector<float>& params, const Replica& replica, int64_t step);

// After step `step` (`epoch_step` of `epoch`): the checksums when due (not under --shard
// parameters: no replica holds the whole parameters), then the checkpoint when due: replica r of N
// writes slice r of the parameters and optimizer state. Errors name `where`.
Status after_step_checks(ReplicaState& state, const Replica& replica, size_t total, int64_t step, int epoch,
                         int64_t epoch_step, const std::string& where);

}  // namespace troupe
