#include "trainers/gpu_layout.h"

#include <vector>

#include "trainers/trainer_driver.h"

namespace troupe {

Expected<MlpLayout> gpu_mlp_layout(const TrainOptions& o, DataSpec data) {
  if (o.model != "mlp") {
    return invalid_argument("GPU workers train the built-in mlp for now (got --model " + o.model +
                            "); train it on CPU workers (drop --gpus-per-worker)");
  }
  if (o.precision != DType::f32) return invalid_argument("GPU workers compute in f32 for now: drop --precision");
  if (o.accumulate != 1) return invalid_argument("GPU workers do not take --accumulate yet");
  auto config = trainer_config(o);
  if (!config.ok()) return config.status();
  auto hidden = config->get_int_list("hidden", {256, 128});
  if (!hidden.ok()) return hidden.status();
  std::vector<int> dims{static_cast<int>(data.features)};
  for (int64_t h : *hidden) dims.push_back(static_cast<int>(h));
  dims.push_back(data.classes);
  return MlpLayout::make(dims);
}

}  // namespace troupe
