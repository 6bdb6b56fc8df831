#include "trainers/setup/gpu_options.h"

namespace troupe {

Status check_gpu_worker_options(const TrainOptions& o) {
  if (o.model != "mlp" && o.model != "cnn") {
    return invalid_argument("GPU workers train the built-in mlp or cnn for now (got --model " + o.model +
                            "); train it on CPU workers (drop --gpus-per-worker)");
  }
  if (o.precision != DType::f32 && o.model != "mlp")
    return invalid_argument("GPU workers train the " + o.model + " in f32 for now (--precision bf16 and f16 are the "
                            "mlp's)");
  if (o.accumulate != 1) return invalid_argument("GPU workers do not take --accumulate yet");
  return {};
}

int device_optimizer_vectors(const TrainOptions& o) {
  if (o.optimizer == "sgd") return o.momentum != 0.0f ? 1 : 0;
  return 2;
}

Status check_device_optimizer_state(const TrainOptions& o, const OptimizerState& state, size_t n) {
  if (state.name != o.optimizer) {
    return invalid_argument("the checkpoint's optimizer state is " + state.name + "'s; this job trains with " +
                            o.optimizer);
  }
  const size_t want = static_cast<size_t>(device_optimizer_vectors(o));
  if (state.vectors.size() != want) {
    return invalid_argument("the checkpoint's " + state.name + " state has " + std::to_string(state.vectors.size()) +
                            " vectors; this job's (momentum " + std::to_string(o.momentum) + ") keeps " +
                            std::to_string(want));
  }
  for (const std::vector<float>& v : state.vectors) {
    if (v.size() != n) {
      return invalid_argument("the checkpoint's optimizer state covers " + std::to_string(v.size()) +
                              " parameters; the model has " + std::to_string(n));
    }
  }
  return {};
}

}  // namespace troupe
