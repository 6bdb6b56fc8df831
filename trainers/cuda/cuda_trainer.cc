#include "trainers/cuda/cuda_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "kernels/cuda/runtime.h"
#include "trainers/cuda/cuda_job.h"
#include "trainers/report/epoch_report.h"
#include "trainers/local/local_trainer.h"
#include "trainers/optim/loss_scale.h"
#include "trainers/setup/model_file.h"

namespace troupe {
namespace {

using namespace cuda_detail;  // NOLINT: internal helpers of this trainer
using Clock = std::chrono::steady_clock;

Status check_inputs(const TrainOptions& o, const ModelSpec& spec, const Dataset& train, const Dataset& test) {
  TROUPE_RETURN_IF_ERROR(o.validate());
  if (!o.device.is_cuda()) {
    return invalid_argument("training on the GPU: device is " + o.device.to_string() + "; pass cuda or cuda:N");
  }
  // The one-device trainer keeps the whole training set on the GPU.
  TROUPE_RETURN_IF_ERROR(require_in_memory(train, "troupe train --device cuda"));
  if (spec.features != train.features() || spec.classes != train.classes) {
    return invalid_argument("model " + spec.name + " does not map the data set's " + std::to_string(train.features()) +
                            " features to its " + std::to_string(train.classes) + " classes");
  }
  if (test.features() != train.features()) {
    return invalid_argument("test images have " + std::to_string(test.features()) + " features, training images " +
                            std::to_string(train.features()));
  }
  if (train.count > INT32_MAX) return invalid_argument("training on the GPU: more than 2^31 training examples");
  return {};
}

}  // namespace

Expected<TrainResult> train_model_cuda(const TrainOptions& o, ModelSpec spec, const Dataset& train,
                                       const Dataset& test, const ProgressFn& progress) {
  const auto job_start = Clock::now();
  TROUPE_RETURN_IF_ERROR(check_inputs(o, spec, train, test));
  // Mini-batches are full, as on the CPU: the last partial batch of an epoch is dropped (its
  // examples are seen in other epochs, since every epoch has its own permutation).
  const int64_t steps_per_epoch = train.count / o.batch_size;
  if (steps_per_epoch == 0) {
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " is larger than the " +
                            std::to_string(train.count) + " training examples");
  }
  if (!o.save_path.empty()) TROUPE_RETURN_IF_ERROR(check_save_target(o.save_path));  // fails now, not after training
  TROUPE_RETURN_IF_ERROR(kernels::cuda::select_device(o.device.index));

  const std::string model_name = spec.name;
  CudaJob job(o, std::move(spec), steps_per_epoch);
  struct Drain {  // on every way out, let enqueued work finish before buffers are freed
    CudaJob& j;
    ~Drain() { j.drain(); }
  } drain{job};
  TROUPE_RETURN_IF_ERROR(job.setup(train, test));

  TrainResult result;
  result.model = model_name;
  result.precision = dtype_name(o.precision);
  result.device = o.device.to_string() + " (" + kernels::cuda::device_name(o.device.index) + ")";
  spdlog::info("training {} on {} with {} (lr {}, {}), {} steps/epoch, cuda graphs {}", model_name,
               result.device, o.optimizer, o.effective_lr(), o.lr_schedule, steps_per_epoch, o.cuda_graphs ? "on" : "off");

  kernels::cuda::Event events[2];
  TROUPE_RETURN_IF_ERROR(events[0].create());
  TROUPE_RETURN_IF_ERROR(events[1].create());
  double train_seconds = 0;
  int64_t step = 0;  // global steps enqueued
  int64_t last_chunk_first = 0;  // the epoch step that began the last chunk read back
  bool stop = false;
  std::vector<int32_t> perm = epoch_permutation(train.count, o.seed, 1);

  for (int epoch = 1; epoch <= o.epochs && !stop; ++epoch) {
    const auto epoch_start = Clock::now();
    TROUPE_RETURN_IF_ERROR(job.start_epoch(perm));
    EpochTally tally;
    const int64_t epoch_first_step = step;

    // Reads back one finished chunk: checks each step's loss, adds it up, reports progress.
    auto finish_chunk = [&](int64_t first, int64_t count, cudaEvent_t done) -> Status {
      TROUPE_RETURN_IF_ERROR(
          kernels::cuda::wait_event(done, kWaitSeconds, "training steps of epoch " + std::to_string(epoch)));
      last_chunk_first = first;
      // f16: the step where the device's loss scaling gave up, if it did in this chunk (the steps
      // after it ran, skipped; the CPU stops there, so this run reports what the CPU would).
      const kernels::cuda::DeviceLossScale* ls = job.loss_scale_after(first);
      const int64_t gave_up_at = ls && ls->failed_step != 0 ? ls->failed_step - epoch_first_step : 0;
      for (int64_t s = first; s < first + count; ++s) {
        const float loss = job.step_loss(s);
        if (!std::isfinite(loss)) {
          return nonfinite_loss(loss, epoch, s + 1, steps_per_epoch, epoch_first_step + s + 1, o.effective_lr());
        }
        if (s + 1 == gave_up_at) {
          return loss_scale_gave_up(ls->failed_in_a_row, ls->failed_scale)
              .with_context(result.device + " at epoch " + std::to_string(epoch) + ", step " + std::to_string(s + 1));
        }
        tally.add(loss, static_cast<int64_t>(job.step_correct(s)));
      }
      if (progress) {
        const int64_t steps_left = (o.epochs - epoch) * steps_per_epoch + (steps_per_epoch - tally.steps);
        progress(step_progress(o, epoch, steps_per_epoch, tally, seconds_since(epoch_start), steps_left));
      }
      return {};
    };

    // Chunk c runs while the host reads back chunk c - 1: the GPU always has the next work queued.
    int64_t pending_first = -1, pending_count = 0;
    int chunk_index = 0;
    for (int64_t first = 0; first < steps_per_epoch && !stop; first += kStepsPerChunk, ++chunk_index) {
      int64_t count = std::min(kStepsPerChunk, steps_per_epoch - first);
      if (o.max_steps > 0 && step + count >= o.max_steps) {
        count = o.max_steps - step;
        stop = true;
      }
      cudaEvent_t done = events[chunk_index % 2].get();
      TROUPE_RETURN_IF_ERROR(job.enqueue_chunk(first, count, done));
      step += count;
      if (chunk_index == 0 && epoch < o.epochs && !stop) {
        perm = epoch_permutation(train.count, o.seed, epoch + 1);  // overlaps the GPU's work
      }
      if (pending_first >= 0) {
        TROUPE_RETURN_IF_ERROR(finish_chunk(pending_first, pending_count, events[(chunk_index + 1) % 2].get()));
      }
      pending_first = first;
      pending_count = count;
    }
    TROUPE_RETURN_IF_ERROR(finish_chunk(pending_first, pending_count, events[(chunk_index + 1) % 2].get()));

    const double epoch_seconds = seconds_since(epoch_start);
    train_seconds += epoch_seconds;
    EpochStats es = epoch_stats(epoch, tally, o.batch_size, epoch_seconds);
    if (o.evaluate_each_epoch || epoch == o.epochs || stop) {
      auto acc = job.evaluate(job.test_data());
      if (!acc.ok()) return acc.status();
      es.test_accuracy = *acc;
    }
    report_epoch(es, o, steps_per_epoch, &result, progress);
  }
  auto finite = job.params_finite();
  if (!finite.ok()) return finite.status();
  if (!*finite) {
    return numeric_error("parameters are not finite after training on " + result.device + "; lower --lr (" +
                         std::to_string(o.effective_lr()) + ")");
  }
  if (const auto* ls = job.loss_scale_after(last_chunk_first)) {  // the state after the last step
    result.overflow_steps = ls->state.skipped;
    result.loss_scale = ls->state.scale;
  }
  finish_result(&result, step, o.batch_size, train_seconds);
  if (!o.save_path.empty()) {  // --save: the trained parameters in the CPU trainer's layout and blocks
    auto params = job.read_params();
    if (!params.ok()) return params.status().with_context("--save");
    TROUPE_RETURN_IF_ERROR(save_trained_model(o, train, *params, result));
    spdlog::info("model written to {}", o.save_path);
  }
  result.wall_seconds = seconds_since(job_start);
  return result;
}


Expected<TrainResult> train_cuda(const TrainOptions& o, const Dataset& train, const Dataset& test,
                                 const ProgressFn& progress) {
  auto spec = cuda_model_spec(o, train.spec());
  if (!spec.ok()) return spec.status();
  return train_model_cuda(o, std::move(*spec), train, test, progress);
}

}  // namespace troupe
