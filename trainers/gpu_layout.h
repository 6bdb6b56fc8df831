// The model a GPU worker trains (sync: trainers/cuda_replica.h; async: trainers/cuda_ps_worker.h):
// the built-in MLP in f32, its layout from the job's settings. CPU code, so both paths and the job
// spec refuse the same options with the same words, and tests check it without a GPU.
#pragma once

#include "core/status.h"
#include "trainers/api/trainer.h"
#include "trainers/mlp.h"
#include "trainers/train_options.h"

namespace troupe {

// The MLP's layout {features, --hidden (or the trainer arg hidden=...), classes}. invalid_argument
// naming the option for another --model, a --precision other than f32, --accumulate > 1, a bad
// trainer arg.
Expected<MlpLayout> gpu_mlp_layout(const TrainOptions& options, DataSpec data);

}  // namespace troupe
