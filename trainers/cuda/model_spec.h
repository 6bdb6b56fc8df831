// Which model a GPU loop trains (the one-device trainer, a sync job's GPU replica): built from the
// job's options as the CPU trainer of the same name would start — the same layout from
// --trainer-arg / --hidden, the same initial parameters for the seed — and made on the device once
// the loop's stream and cuBLAS handle exist.
//
// The runtime knows no model by name: a built-in model with a GPU half (models/mlp, models/cnn)
// registers a factory of its ModelSpec under its trainer's name (TROUPE_REGISTER_CUDA_MODEL, at
// load, as TROUPE_REGISTER_TRAINER does for the CPU half), and cuda_model_spec looks it up.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/blas.h"
#include "trainers/api/trainer.h"
#include "trainers/cuda/cuda_model.h"
#include "trainers/setup/train_options.h"

namespace troupe {

struct ModelSpec {
  std::string name;  // "mlp 784-256-128-10 (235146 parameters)", as the CPU trainer's TrainResult.model
  std::function<Expected<std::unique_ptr<CudaModel>>(const kernels::cuda::CublasHandle&)> make;
  std::vector<float> initial;  // the CPU trainer's starting parameters for options.seed
  int64_t features = 0;
  int classes = 0;
};

// A model's GPU half: its ModelSpec for the job's options on examples of shape `data` (one class per
// example: checked before). Errors name the setting that cannot run on a GPU.
using CudaModelFactory = std::function<Expected<ModelSpec>(const TrainOptions& options, const DataSpec& data)>;

// Registers `factory` as the GPU half of trainer `name`; false (nothing changed) when one is
// registered under that name already.
bool register_cuda_model(const std::string& name, CudaModelFactory factory);
// The names with a GPU half, sorted ("cnn, mlp").
std::string cuda_model_names();

#define TROUPE_CUDA_MODEL_CONCAT2(a, b) a##b
#define TROUPE_CUDA_MODEL_CONCAT(a, b) TROUPE_CUDA_MODEL_CONCAT2(a, b)
// At namespace scope in the model's library: registers `factory` as trainer `name`'s GPU half.
#define TROUPE_REGISTER_CUDA_MODEL(name, factory) \
  static const bool TROUPE_CUDA_MODEL_CONCAT(troupe_cuda_model_, __LINE__) = ::troupe::register_cuda_model(name, factory)

// options.model's GPU half on examples of shape `data`. invalid_argument for a bad layout or setting;
// unavailable for a trainer without one (it runs on CPUs) and the model's own refusals (the cnn
// without cuDNN). With options.init_from (--init-from) `initial` is that model file's parameters
// instead, loaded as the CPU trainer of the same name loads them (the GPU models use its flat
// layout), so a model trained on CPUs goes on on a GPU and the other way round; load_model_into's errors.
Expected<ModelSpec> cuda_model_spec(const TrainOptions& options, DataSpec data);

}  // namespace troupe
