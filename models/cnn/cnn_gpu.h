// The cnn on a GPU: registered for `--model cnn` with TROUPE_REGISTER_CUDA_MODEL (cnn_cuda_spec.cc),
// cuDNN convolutions in strict f32 (options.tf32: TF32 tensor cores allowed).
#pragma once

#include "trainers/cuda/cuda_trainer.h"

namespace troupe {

// Trains the cnn trainer's network (models/cnn/cnn.h; its settings from options.trainer_args, as on
// the CPU) with train_cuda, whatever options.model says (benchmarks and the GPU tests). unavailable
// also when this troupe was built without cuDNN or cuDNN cannot be loaded.
Expected<TrainResult> train_cnn_cuda(const TrainOptions& options, const Dataset& train, const Dataset& test,
                                     const ProgressFn& progress = {});

}  // namespace troupe
