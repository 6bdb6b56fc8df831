#include "trainers/local/local_trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "core/config.h"
#include "data/data_source.h"
#include "trainers/report/epoch_report.h"
#include "trainers/sync/trainer_driver.h"

#ifdef TROUPE_WITH_CUDA
#include "trainers/cuda/cuda_trainer.h"
#endif

namespace troupe {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Expected<TrainResult> train_mlp_cpu(const TrainOptions& o, const Dataset& train, const Dataset& test,
                                    const ProgressFn& progress) {
  TrainOptions mlp = o;
  mlp.model = "mlp";
  return train_with_trainer(mlp, train, test, progress);
}

Expected<TrainResult> train_local(const TrainOptions& o, const ProgressFn& progress) {
  TROUPE_RETURN_IF_ERROR(o.validate());
  const auto start = Clock::now();
  TrainOptions with_dir = o;
  if (with_dir.dataset_dir.empty()) {
    auto cfg = Config::from_environment();
    if (!cfg.ok()) return cfg.status();
    with_dir.dataset_dir = cfg->dataset_dir;
  }
  auto data = load_train_data(with_dir);
  if (!data.ok()) return data.status();
  if (!o.data.empty()) spdlog::info("data: {}", data->description);
  const auto& train = data->train;
  const auto& test = data->test;
  Expected<TrainResult> result = TrainResult{};
  if (o.device.is_cpu()) {
    result = train_with_trainer(o, *train, *test, progress);
  } else {
#ifdef TROUPE_WITH_CUDA
    result = train_cuda(o, *train, *test, progress);  // a trainer without a GPU half is refused, named
    if (!result.ok()) return result.status().with_context("--device " + o.device.to_string());
#else
    return unavailable("--device " + o.device.to_string() +
                       ": this troupe was built without CUDA (nvcc was not found when it was configured); "
                       "use --device cpu or rebuild where /usr/local/cuda/bin/nvcc exists");
#endif
  }
  if (result.ok()) result->wall_seconds = seconds_since(start);
  return result;
}

}  // namespace troupe
