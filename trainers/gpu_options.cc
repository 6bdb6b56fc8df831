#include "trainers/gpu_options.h"

namespace troupe {

Status check_gpu_worker_options(const TrainOptions& o) {
  if (o.model != "mlp" && o.model != "cnn") {
    return invalid_argument("GPU workers train the built-in mlp or cnn for now (got --model " + o.model +
                            "); train it on CPU workers (drop --gpus-per-worker)");
  }
  if (o.precision != DType::f32) return invalid_argument("GPU workers compute in f32 for now: drop --precision");
  if (o.accumulate != 1) return invalid_argument("GPU workers do not take --accumulate yet");
  return {};
}

}  // namespace troupe
