#include "trainers/cuda/model_spec.h"

#include "trainers/cuda/cnn_cuda.h"
#include "trainers/cuda/mlp_cuda.h"
#include "trainers/model_file.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/trainer_setup.h"

namespace troupe {
namespace {

Expected<ModelSpec> spec_for(const TrainOptions& o, const DataSpec& data);

// --init-from: the file's blocks, named as the CPU trainer declares them, over the seeded start.
Status load_initial(const TrainOptions& o, const DataSpec& data, ModelSpec* spec) {
  auto setup = set_up_trainer(o, data, 0, 1);
  if (!setup.ok()) return setup.status();
  if (setup->space.size() != spec->initial.size())
    return internal_error("the GPU's " + spec->name + " has " + std::to_string(spec->initial.size()) +
                          " parameters but " + setup->where + " declares " + std::to_string(setup->space.size()));
  return load_model_into(o.init_from, setup->space, o.model, o.init_partial, spec->initial.data())
      .with_context("--init-from");
}

}  // namespace

Expected<ModelSpec> cuda_model_spec(const TrainOptions& o, DataSpec data) {
  auto spec = spec_for(o, data);
  if (spec.ok() && !o.init_from.empty()) TROUPE_RETURN_IF_ERROR(load_initial(o, data, &*spec));
  return spec;
}

namespace {

Expected<ModelSpec> spec_for(const TrainOptions& o, const DataSpec& data) {
  TROUPE_RETURN_IF_ERROR(require_one_class(data, "the GPU (--device cuda)"));
  ModelSpec spec;
  spec.features = data.features;
  spec.classes = data.classes;
  if (o.model == "cnn") {
    if (o.precision != DType::f32)
      return invalid_argument(std::string("--precision ") + dtype_name(o.precision) + ": the cnn computes in f32 "
                              "on GPUs for now (bf16 is the mlp's there); train it with --device cpu for " +
                              dtype_name(o.precision));
    auto setup = cnn_cuda_setup(o, data);
    if (!setup.ok()) return setup.status();
    spec.name = "cnn " + setup->layout.to_string();
    spec.initial = setup->initial;
    spec.make = [setup = *setup, tf32 = o.tf32](const kernels::cuda::CublasHandle& blas) {
      return make_cnn_cuda(setup, blas, tf32);
    };
    return spec;
  }
  if (o.model != "mlp") {
    return unavailable("trainer '" + o.model + "' runs on CPUs only (the GPU paths are the built-in mlp's and "
                       "cnn's); train it with --device cpu (or without --gpus-per-worker)");
  }
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

}  // namespace troupe
