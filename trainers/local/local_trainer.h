// The one-device strategy: a training job in this process, on the CPU or one GPU. It loads the
// dataset and runs the job: on the CPU through the trainer API's runtime loop
// (trainers/sync/trainer_driver.h) with any registered trainer, on a GPU with the built-in MLP's CUDA
// trainer. Later strategies (sync, async) run the same step on many workers.
#pragma once

#include "data/feed/epoch_order.h"  // epoch_permutation, the order of every trainer
#include "data/readers/fashion_mnist.h"
#include "trainers/setup/train_options.h"

namespace troupe {

// Runs the whole job. Errors: invalid_argument (bad options), not_found / corrupt_data (dataset),
// unavailable (no GPU or built without CUDA for --device cuda), numeric_error (the loss stopped
// being finite: the message names the epoch and step).
Expected<TrainResult> train_local(const TrainOptions& options, const ProgressFn& progress = {});

// The built-in MLP on already loaded data, on the CPU: train_with_trainer (trainers/sync/trainer_driver.h)
// with trainer "mlp" whatever options.model says (benchmarks and tests call it on small data).
Expected<TrainResult> train_mlp_cpu(const TrainOptions& options, const Dataset& train, const Dataset& test,
                                    const ProgressFn& progress = {});

}  // namespace troupe
