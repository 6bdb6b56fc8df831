// The mlp's GPU half, registered for `--model mlp`: the layout from --trainer-arg hidden= (or
// --hidden), as the CPU trainer reads it, and the device model MlpCuda.
#include "models/mlp/mlp_cuda.h"
#include "models/mlp/mlp_gpu.h"
#include "trainers/sync/trainer_driver.h"  // trainer_config

namespace troupe {
namespace {

Expected<ModelSpec> mlp_spec_for(const TrainOptions& o, const DataSpec& data) {
  auto config = trainer_config(o);
  if (!config.ok()) return config.status();
  auto hidden = config->get_int_list("hidden", {256, 128});
  if (!hidden.ok()) return hidden.status();
  std::vector<int> dims{static_cast<int>(data.features)};
  for (int64_t h : *hidden) dims.push_back(static_cast<int>(h));
  dims.push_back(data.classes);
  auto layout = MlpLayout::make(dims);
  if (!layout.ok()) return layout.status();
  return mlp_model_spec(o, *layout);
}

TROUPE_REGISTER_CUDA_MODEL("mlp", mlp_spec_for);

}  // namespace

Expected<ModelSpec> mlp_model_spec(const TrainOptions& o, const MlpLayout& layout) {
  ModelSpec spec;
  spec.name = "mlp " + layout.to_string();
  spec.features = layout.layers() > 0 ? layout.in(0) : 0;
  spec.classes = layout.layers() > 0 ? layout.dims.back() : 0;
  spec.initial.resize(layout.param_count);
  mlp_init(layout, o.seed, spec.initial.data());  // the CPU trainer's starting point
  spec.make = [layout, p = o.precision](const kernels::cuda::CublasHandle& blas)
      -> Expected<std::unique_ptr<CudaModel>> { return std::unique_ptr<CudaModel>(new MlpCuda(layout, blas, p)); };
  return spec;
}

Expected<TrainResult> train_mlp_cuda(const TrainOptions& o, const MlpLayout& layout, const Dataset& train,
                                     const Dataset& test, const ProgressFn& progress) {
  auto spec = mlp_model_spec(o, layout);
  if (!spec.ok()) return spec.status();
  return train_model_cuda(o, std::move(*spec), train, test, progress);
}

}  // namespace troupe
