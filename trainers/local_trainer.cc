#include "trainers/local_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include <spdlog/spdlog.h>

#include "core/config.h"
#include "kernels/cpu/blas_info.h"
#include "kernels/cpu/denormals.h"
#include "kernels/cpu/ops.h"
#include "trainers/epoch_report.h"
#include "trainers/lr_schedule.h"
#include "trainers/mlp.h"
#include "trainers/optimizer.h"

#ifdef TROUPE_WITH_CUDA
#include "trainers/cuda/mlp_cuda_trainer.h"
#endif

namespace troupe {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// input features -> hidden sizes -> classes
Expected<MlpLayout> layout_for(const TrainOptions& o, const Dataset& train) {
  std::vector<int> dims{static_cast<int>(train.features())};
  dims.insert(dims.end(), o.hidden.begin(), o.hidden.end());
  dims.push_back(train.classes);
  return MlpLayout::make(dims);
}

// Test-set accuracy, in chunks so activations stay small.
double evaluate(MlpCpu& model, const float* params, const Dataset& data) {
  constexpr int kChunk = 1000;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < data.count; begin += kChunk) {
    int rows = static_cast<int>(std::min<int64_t>(kChunk, data.count - begin));
    int64_t c = 0;
    model.evaluate(params, data.images.data() + begin * data.features(), data.labels.data() + begin, rows, &c);
    correct += c;
  }
  return data.count ? static_cast<double>(correct) / data.count : 0.0;
}

}  // namespace

std::vector<int32_t> epoch_permutation(int64_t n, uint64_t seed, int epoch) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed + static_cast<uint64_t>(epoch));
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

Expected<TrainResult> train_mlp_cpu(const TrainOptions& o, const Dataset& train, const Dataset& test,
                                    const ProgressFn& progress) {
  TROUPE_RETURN_IF_ERROR(o.validate());
  auto layout = layout_for(o, train);
  if (!layout.ok()) return layout.status();
  // Mini-batches are full: the last partial batch of an epoch is dropped (its examples are seen in
  // other epochs, since every epoch has its own permutation).
  const int64_t steps_per_epoch = train.count / o.batch_size;
  if (steps_per_epoch == 0) {
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " is larger than the " +
                            std::to_string(train.count) + " training examples");
  }
  kernels::cpu::set_blas_threads(o.cpu_threads);
  kernels::cpu::ScopedFlushDenormals flush_denormals;  // see kernels/cpu/denormals.h

  OptimizerOptions oo;
  oo.name = o.optimizer;
  oo.lr = o.effective_lr();
  oo.momentum = o.momentum;
  oo.weight_decay = o.weight_decay;
  auto opt = make_optimizer(oo, layout->param_count);
  if (!opt.ok()) return opt.status();

  LrSchedule schedule = LrSchedule::constant;
  parse_lr_schedule(o.lr_schedule, &schedule);  // validated above
  const int64_t total_steps =
      o.max_steps > 0 ? std::min<int64_t>(o.max_steps, steps_per_epoch * o.epochs) : steps_per_epoch * o.epochs;
  std::vector<float> params(layout->param_count), grads(layout->param_count);
  mlp_init(*layout, o.seed, params.data());
  MlpCpu model(*layout);
  spdlog::info("training mlp {} on cpu with {} ({} steps/epoch, OpenBLAS {} kernels, {} thread(s))",
               layout->to_string(), (*opt)->describe(), steps_per_epoch, kernels::cpu::blas_corename(), o.cpu_threads);

  const int64_t features = train.features();
  std::vector<float> batch_x(static_cast<size_t>(o.batch_size) * features);
  std::vector<int32_t> batch_y(o.batch_size);
  TrainResult result;
  result.model = "mlp " + layout->to_string();
  result.device = "cpu";
  const auto job_start = Clock::now();
  double train_seconds = 0;
  int64_t step = 0;
  bool stop = false;

  for (int epoch = 1; epoch <= o.epochs && !stop; ++epoch) {
    const auto epoch_start = Clock::now();
    std::vector<int32_t> order = epoch_permutation(train.count, o.seed, epoch);
    EpochTally tally;
    for (int64_t s = 0; s < steps_per_epoch; ++s) {
      for (int r = 0; r < o.batch_size; ++r) {
        const int32_t idx = order[static_cast<size_t>(s * o.batch_size + r)];
        std::copy_n(train.images.data() + idx * features, features, batch_x.data() + r * features);
        batch_y[r] = train.labels[idx];
      }
      int64_t correct = 0;
      float loss = model.forward_backward(params.data(), batch_x.data(), batch_y.data(), o.batch_size, grads.data(),
                                          &correct);
      ++step;
      if (step % o.loss_check_every == 0 && !std::isfinite(loss)) {
        return nonfinite_loss(loss, epoch, s + 1, steps_per_epoch, step, oo.lr);
      }
      (*opt)->set_lr(scheduled_lr(schedule, oo.lr, step - 1, total_steps));
      (*opt)->step(params.data(), grads.data());
      tally.add(loss, correct);
      if (progress) progress(step_progress(o, epoch, steps_per_epoch, tally, seconds_since(epoch_start), total_steps - step));
      if (o.max_steps > 0 && step >= o.max_steps) {
        stop = true;
        break;
      }
    }
    const double epoch_seconds = seconds_since(epoch_start);
    train_seconds += epoch_seconds;
    EpochStats es = epoch_stats(epoch, tally, o.batch_size, epoch_seconds);
    if (o.evaluate_each_epoch || epoch == o.epochs || stop) es.test_accuracy = evaluate(model, params.data(), test);
    report_epoch(es, o, steps_per_epoch, &result, progress);
  }
  if (!kernels::cpu::all_finite(params.data(), params.size())) {
    return numeric_error("parameters are not finite after training; lower --lr (" + std::to_string(oo.lr) + ")");
  }
  finish_result(&result, step, o.batch_size, train_seconds);
  result.wall_seconds = seconds_since(job_start);
  return result;
}

Expected<TrainResult> train_local(const TrainOptions& o, const ProgressFn& progress) {
  TROUPE_RETURN_IF_ERROR(o.validate());
  const auto start = Clock::now();
  std::string dir = o.dataset_dir;
  if (dir.empty()) {
    auto cfg = Config::from_environment();
    if (!cfg.ok()) return cfg.status();
    dir = cfg->dataset_dir;
  }
  auto train = load_fashion_mnist(dir, Split::train);
  if (!train.ok()) return train.status().with_context("loading the training set");
  auto test = load_fashion_mnist(dir, Split::test);
  if (!test.ok()) return test.status().with_context("loading the test set");
  Expected<TrainResult> result = TrainResult{};
  if (o.device.is_cpu()) {
    result = train_mlp_cpu(o, *train, *test, progress);
  } else {
#ifdef TROUPE_WITH_CUDA
    auto layout = layout_for(o, *train);
    if (!layout.ok()) return layout.status();
    result = train_mlp_cuda(o, *layout, *train, *test, progress);
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
