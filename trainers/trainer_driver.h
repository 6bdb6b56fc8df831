// The runtime side of the trainer API for a job in this process (the `local` strategy on the CPU):
// it builds the trainer registered as TrainOptions::model, owns its flat parameter and gradient
// buffers, initialises them from the seed, batches shuffled data, applies the optimizer and
// learning-rate schedule, evaluates on the test split and reports progress. The trainer only
// computes losses and gradients (trainers/api/trainer.h).
#pragma once

#include <cstdint>
#include <vector>

#include "trainers/api/trainer.h"
#include "trainers/fashion_mnist.h"
#include "trainers/train_options.h"

namespace troupe {

// Fills `params` (space.size() floats) block by block in declaration order from one mt19937_64
// seeded with `seed`: the same on every replica, and for the MLP the same as mlp_init.
void init_parameters(const ParameterSpace& space, uint64_t seed, float* params);

// The trainer's settings for a job: TrainOptions::trainer_args, plus "hidden" from --hidden when
// the args do not set it. invalid_argument for an arg that is not key=value.
Expected<JobConfig> trainer_config(const TrainOptions& options);

// Runs the whole job on the CPU. `final_params` (if given) receives the trained parameters. Errors:
// invalid_argument (bad options, unknown trainer, a setup() error), numeric_error (a loss that is no
// longer finite, naming the epoch and step), or a trainer's own error with where it happened.
Expected<TrainResult> train_with_trainer(const TrainOptions& options, const Dataset& train, const Dataset& test,
                                         const ProgressFn& progress = {}, std::vector<float>* final_params = nullptr);

}  // namespace troupe
