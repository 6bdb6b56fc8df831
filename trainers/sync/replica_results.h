// What a sync replica reports: the test split scored after an epoch over every replica (each
// scores its slice of the rows, one all-reduce sums them; --shard parameters layer by layer), and
// the trained model written at the end (--save: rank 0 writes it; under --shard parameters it is
// never whole, so every replica gathers it a layer at a time and rank 0 writes each).
#pragma once

#include <map>
#include <string>

#include "trainers/sync/gradient_sync.h"
#include "trainers/sync/replica_state.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe {

// Test accuracy and loss of `data` over all replicas (collective). Errors of the trainer and collectives.
Expected<SplitScore> score_replicas(Trainer& trainer, const GradientSync& sync, const Dataset& data,
                                    const Replica& replica);

// --save of the trained model to `path` as `dtype` with `metadata`, by rank `rank` (collective
// under --shard parameters unless `whole`: the parameters were gathered into whole_params()).
Status save_replica_model(ReplicaState& state, const ParameterSpace& space, const std::string& path, DType dtype,
                          const std::map<std::string, std::string>& metadata, int rank, bool whole);

}  // namespace troupe
