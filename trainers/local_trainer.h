// The one-device strategy: a training job in this process, on the CPU or one GPU. It loads the
// dataset, builds the model and optimizer, runs epochs of shuffled mini-batches, checks the loss is
// finite, evaluates on the test split and reports progress. Later strategies (sync, async) run the
// same step on many workers.
#pragma once

#include "trainers/fashion_mnist.h"
#include "trainers/train_options.h"

namespace troupe {

// Runs the whole job. Errors: invalid_argument (bad options), not_found / corrupt_data (dataset),
// unavailable (no GPU or built without CUDA for --device cuda), numeric_error (the loss stopped
// being finite: the message names the epoch and step).
Expected<TrainResult> train_local(const TrainOptions& options, const ProgressFn& progress = {});

// The CPU training loop on already loaded data (used by train_local; tests call it on small data).
Expected<TrainResult> train_mlp_cpu(const TrainOptions& options, const Dataset& train, const Dataset& test,
                                    const ProgressFn& progress = {});

// The permutation of [0, n) that epoch `epoch` (1-based) of a job seeded with `seed` visits.
// Deterministic, and the same for the CPU and GPU trainers.
std::vector<int32_t> epoch_permutation(int64_t n, uint64_t seed, int epoch);

}  // namespace troupe
