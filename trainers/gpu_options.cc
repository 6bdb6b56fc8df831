#include "trainers/gpu_options.h"

namespace troupe {

Status check_gpu_worker_options(const TrainOptions& o) {
  if (o.model != "mlp" && o.model != "cnn") {
    return invalid_argument("GPU workers train the built-in mlp or cnn for now (got --model " + o.model +
                            "); train it on CPU workers (drop --gpus-per-worker)");
  }
  if (o.precision == DType::f16)
    return invalid_argument("GPU workers do not scale the loss on the device yet: --precision bf16, not f16");
  if (o.precision != DType::f32 && o.model != "mlp")
    return invalid_argument("GPU workers train the " + o.model + " in f32 for now (--precision bf16 is the mlp's)");
  if (o.accumulate != 1) return invalid_argument("GPU workers do not take --accumulate yet");
  return {};
}

}  // namespace troupe
