// The mlp on a GPU, as the one-device trainer and a sync job's GPU replicas run it: its ModelSpec
// (registered for `--model mlp` with TROUPE_REGISTER_CUDA_MODEL, mlp_cuda_spec.cc) and a shortcut
// that trains a given layout (benchmarks and the GPU tests).
#pragma once

#include "models/mlp/mlp.h"
#include "trainers/cuda/cuda_trainer.h"
#include "trainers/cuda/model_spec.h"

namespace troupe {

// The mlp `layout` in options.precision (f32, bf16, or f16: the loss scaled on the device), starting
// from mlp_init(options.seed), as the CPU mlp trainer does.
Expected<ModelSpec> mlp_model_spec(const TrainOptions& options, const MlpLayout& layout);

// Trains the MLP `layout` on options.device with train_model_cuda (its errors). `layout` must map
// train.features() inputs to train.classes outputs.
Expected<TrainResult> train_mlp_cuda(const TrainOptions& options, const MlpLayout& layout, const Dataset& train,
                                     const Dataset& test, const ProgressFn& progress = {});

}  // namespace troupe
