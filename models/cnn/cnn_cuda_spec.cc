// The cnn's GPU half, registered for `--model cnn`: the CPU trainer's layout and start
// (cnn_cuda_setup), the device model through cuDNN (make_cnn_cuda).
#include "models/cnn/cnn_cuda.h"
#include "models/cnn/cnn_gpu.h"
#include "trainers/cuda/model_spec.h"

namespace troupe {
namespace {

Expected<ModelSpec> cnn_spec_for(const TrainOptions& o, const DataSpec& data) {
  if (o.precision != DType::f32)
    return invalid_argument(std::string("--precision ") + dtype_name(o.precision) + ": the cnn computes in f32 "
                            "on GPUs for now (bf16 is the mlp's there); train it with --device cpu for " +
                            dtype_name(o.precision));
  auto setup = cnn_cuda_setup(o, data);
  if (!setup.ok()) return setup.status();
  ModelSpec spec;
  spec.features = data.features;
  spec.classes = data.classes;
  spec.name = "cnn " + setup->layout.to_string();
  spec.initial = setup->initial;
  spec.make = [setup = *setup, tf32 = o.tf32](const kernels::cuda::CublasHandle& blas) {
    return make_cnn_cuda(setup, blas, tf32);
  };
  return spec;
}

TROUPE_REGISTER_CUDA_MODEL("cnn", cnn_spec_for);

}  // namespace

Expected<TrainResult> train_cnn_cuda(const TrainOptions& o, const Dataset& train, const Dataset& test,
                                     const ProgressFn& progress) {
  TrainOptions cnn = o;
  cnn.model = "cnn";
  return train_cuda(cnn, train, test, progress);
}

}  // namespace troupe
