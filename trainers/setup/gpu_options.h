// What GPU workers (sync: trainers/cuda/cuda_replica.h; async: trainers/cuda/cuda_ps_worker.h) and the
// one-device GPU loop take of a job's options, checked on the CPU so every path and the job spec
// refuse the same options in the same words, and tests check it without a GPU.
#pragma once

#include "core/status.h"
#include "trainers/optim/optimizer.h"
#include "trainers/setup/train_options.h"

namespace troupe {

// invalid_argument naming the option: a --model other than the built-in mlp and cnn, bf16 or f16
// for the cnn (its cuDNN convolutions are f32), --accumulate > 1. (Async GPU workers refuse f16
// as well: no async worker scales the loss.)
Status check_gpu_worker_options(const TrainOptions& options);

// The state vectors the GPU optimizers keep (kernels/cuda/ops.h sgd_step / adam_step), in the CPU
// Optimizer's OptimizerState order, so a GPU replica's checkpoint is the CPU's format: sgd with
// momentum the velocity, adam and adamw m then v, sgd without momentum none.
int device_optimizer_vectors(const TrainOptions& options);
// invalid_argument unless a checkpoint's `state` is options.optimizer's with
// device_optimizer_vectors() vectors of n floats each, naming what differs.
Status check_device_optimizer_state(const TrainOptions& options, const OptimizerState& state, size_t n);

}  // namespace troupe
