// The GPU training loop of the one-device strategy: a model with a GPU half (the built-in mlp, the
// cnn through cuDNN: trainers/cuda/model_spec.h) trained on one CUDA device with the data set,
// parameters and optimizer state all in device memory.
//
// Per epoch the host makes the same seeded permutation as the CPU trainer (epoch_permutation) and
// uploads it; one gather kernel lays the epoch's batches out in order; then the steps run in chunks
// of up to 64 (cuda_job.h), each chunk one CUDA graph (options.cuda_graphs) or eager launches. Every
// step adds its mean loss and correct count to its own device slot; the host reads the slots of a
// chunk while the next chunk runs, so it never waits per step and the GPU never idles between
// chunks; `progress` is called once per chunk and once at each epoch's end. Starting from the CPU
// trainer's initial parameters for the seed and visiting batches in the same order, it follows the
// CPU trainer's trajectory up to float rounding.
#pragma once

#include "data/readers/fashion_mnist.h"
#include "trainers/cuda/model_spec.h"
#include "trainers/setup/train_options.h"

namespace troupe {

// Trains options.model on options.device: its GPU half from cuda_model_spec (trainers/cuda/model_spec.h:
// a built-in model with one registers it), then train_model_cuda.
Expected<TrainResult> train_cuda(const TrainOptions& options, const Dataset& train, const Dataset& test,
                                 const ProgressFn& progress = {});

// Trains the model `spec` describes on options.device (cuda:N) and evaluates on `test`. The model
// must map train.features() inputs to train.classes outputs. TrainResult and EpochStats are filled
// as documented in train_options.h; EpochStats.seconds and samples/s cover training only (not
// evaluation, not the one-off graph capture, which counts in wall_seconds).
// Errors: invalid_argument (bad options, a model that does not fit the data), unavailable (no GPU,
// built for another GPU, out of GPU memory: the message says what to do), numeric_error (a
// non-finite training loss, naming the epoch and step; every step's loss is checked, read back once
// per chunk), timeout (the GPU stopped making progress), internal (a CUDA or cuBLAS failure: a bug).
Expected<TrainResult> train_model_cuda(const TrainOptions& options, ModelSpec spec, const Dataset& train,
                                       const Dataset& test, const ProgressFn& progress = {});

}  // namespace troupe
