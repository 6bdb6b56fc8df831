// Which model a GPU loop trains (the one-device trainer, a sync job's GPU replica): built from the
// job's options as the CPU trainer of the same name would start — the same layout from
// --trainer-arg / --hidden, the same initial parameters for the seed — and made on the device once
// the loop's stream and cuBLAS handle exist.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/blas.h"
#include "trainers/api/trainer.h"
#include "trainers/cuda/cuda_model.h"
#include "trainers/mlp.h"
#include "trainers/train_options.h"

namespace troupe {

struct ModelSpec {
  std::string name;  // "mlp 784-256-128-10 (235146 parameters)", as the CPU trainer's TrainResult.model
  std::function<Expected<std::unique_ptr<CudaModel>>(const kernels::cuda::CublasHandle&)> make;
  std::vector<float> initial;  // the CPU trainer's starting parameters for options.seed
  int64_t features = 0;
  int classes = 0;
};

// options.model "mlp" (hidden widths from trainer_config) or "cnn" (trainers/cnn.h) on examples of
// shape `data`. invalid_argument for a bad layout or setting; unavailable for any other trainer
// (they run on CPUs) and for the cnn without cuDNN (when the model is made). With
// options.init_from (--init-from) `initial` is that model file's parameters instead, loaded as the
// CPU trainer of the same name loads them (the GPU models use its flat layout), so a model trained
// on CPUs goes on on a GPU and the other way round; load_model_into's errors.
Expected<ModelSpec> cuda_model_spec(const TrainOptions& options, DataSpec data);

// The mlp `layout` in options.precision (f32, bf16, or f16: the loss scaled on the device), starting
// from mlp_init(options.seed), as the CPU mlp trainer does.
Expected<ModelSpec> mlp_model_spec(const TrainOptions& options, const MlpLayout& layout);

}  // namespace troupe
