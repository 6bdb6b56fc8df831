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

// The epochs as chunks of steps on the GPU. Chunk c runs while the host reads back chunk c - 1:
// the GPU always has the next work queued.
class ChunkedEpochs {
 public:
  ChunkedEpochs(const TrainOptions& o, const Dataset& train, CudaJob& job, int64_t steps_per_epoch,
                const ProgressFn& progress, TrainResult& result)
      : o_(o), train_(train), job_(job), steps_per_epoch_(steps_per_epoch), progress_(progress), result_(result) {}

  // Every epoch (or up to --max-steps); the result's history filled.
  Status run();
  int64_t steps() const { return step_; }
  double train_seconds() const { return train_seconds_; }
  // The epoch step that began the last chunk read back.
  int64_t last_chunk_first() const { return last_chunk_first_; }

 private:
  struct Epoch {
    int epoch = 0;
    Clock::time_point start;
    int64_t first_step = 0;  // the global steps before it
    EpochTally tally;
  };
  Status run_epoch(int epoch);
  // Reads back one finished chunk: checks each step's loss, adds it up, reports progress.
  Status finish_chunk(Epoch& e, int64_t first, int64_t count, cudaEvent_t done);

  const TrainOptions& o_;
  const Dataset& train_;
  CudaJob& job_;
  const int64_t steps_per_epoch_;
  const ProgressFn& progress_;
  TrainResult& result_;
  kernels::cuda::Event events_[2];
  double train_seconds_ = 0;
  int64_t step_ = 0;              // global steps enqueued
  int64_t last_chunk_first_ = 0;
  bool stop_ = false;
  std::vector<int32_t> perm_;
};

Status ChunkedEpochs::run() {
  TROUPE_RETURN_IF_ERROR(events_[0].create());
  TROUPE_RETURN_IF_ERROR(events_[1].create());
  perm_ = epoch_permutation(train_.count, o_.seed, 1);
  for (int epoch = 1; epoch <= o_.epochs && !stop_; ++epoch) TROUPE_RETURN_IF_ERROR(run_epoch(epoch));
  return {};
}

Status ChunkedEpochs::run_epoch(int epoch) {
  Epoch e;
  e.epoch = epoch;
  e.start = Clock::now();
  TROUPE_RETURN_IF_ERROR(job_.start_epoch(perm_));
  e.first_step = step_;
  int64_t pending_first = -1, pending_count = 0;
  int chunk_index = 0;
  for (int64_t first = 0; first < steps_per_epoch_ && !stop_; first += kStepsPerChunk, ++chunk_index) {
    int64_t count = std::min(kStepsPerChunk, steps_per_epoch_ - first);
    if (o_.max_steps > 0 && step_ + count >= o_.max_steps) {
      count = o_.max_steps - step_;
      stop_ = true;
    }
    cudaEvent_t done = events_[chunk_index % 2].get();
    TROUPE_RETURN_IF_ERROR(job_.enqueue_chunk(first, count, done));
    step_ += count;
    if (chunk_index == 0 && epoch < o_.epochs && !stop_) {
      perm_ = epoch_permutation(train_.count, o_.seed, epoch + 1);  // overlaps the GPU's work
    }
    if (pending_first >= 0) {
      TROUPE_RETURN_IF_ERROR(finish_chunk(e, pending_first, pending_count, events_[(chunk_index + 1) % 2].get()));
    }
    pending_first = first;
    pending_count = count;
  }
  TROUPE_RETURN_IF_ERROR(finish_chunk(e, pending_first, pending_count, events_[(chunk_index + 1) % 2].get()));

  const double epoch_seconds = seconds_since(e.start);
  train_seconds_ += epoch_seconds;
  EpochStats es = epoch_stats(epoch, e.tally, o_.batch_size, epoch_seconds);
  if (o_.evaluate_each_epoch || epoch == o_.epochs || stop_) {
    auto acc = job_.evaluate(job_.test_data());
    if (!acc.ok()) return acc.status();
    es.test_accuracy = *acc;
  }
  report_epoch(es, o_, steps_per_epoch_, &result_, progress_);
  return {};
}

Status ChunkedEpochs::finish_chunk(Epoch& e, int64_t first, int64_t count, cudaEvent_t done) {
  const int epoch = e.epoch;
  TROUPE_RETURN_IF_ERROR(
      kernels::cuda::wait_event(done, kWaitSeconds, "training steps of epoch " + std::to_string(epoch)));
  last_chunk_first_ = first;
  // f16: the step where the device's loss scaling gave up, if it did in this chunk (the steps
  // after it ran, skipped; the CPU stops there, so this run reports what the CPU would).
  const kernels::cuda::DeviceLossScale* ls = job_.loss_scale_after(first);
  const int64_t gave_up_at = ls && ls->failed_step != 0 ? ls->failed_step - e.first_step : 0;
  for (int64_t s = first; s < first + count; ++s) {
    const float loss = job_.step_loss(s);
    if (!std::isfinite(loss)) {
      return nonfinite_loss(loss, epoch, s + 1, steps_per_epoch_, e.first_step + s + 1, o_.effective_lr());
    }
    if (s + 1 == gave_up_at) {
      return loss_scale_gave_up(ls->failed_in_a_row, ls->failed_scale)
          .with_context(result_.device + " at epoch " + std::to_string(epoch) + ", step " + std::to_string(s + 1));
    }
    e.tally.add(loss, static_cast<int64_t>(job_.step_correct(s)));
  }
  if (progress_) {
    const int64_t steps_left = (o_.epochs - epoch) * steps_per_epoch_ + (steps_per_epoch_ - e.tally.steps);
    progress_(step_progress(o_, epoch, steps_per_epoch_, e.tally, seconds_since(e.start), steps_left));
  }
  return {};
}

// The end of a run: the parameters finite, the result's loss-scale counts and totals, --save.
Status finish_job(const TrainOptions& o, const Dataset& train, CudaJob& job, const ChunkedEpochs& epochs,
                  TrainResult* result) {
  auto finite = job.params_finite();
  if (!finite.ok()) return finite.status();
  if (!*finite) {
    return numeric_error("parameters are not finite after training on " + result->device + "; lower --lr (" +
                         std::to_string(o.effective_lr()) + ")");
  }
  if (const auto* ls = job.loss_scale_after(epochs.last_chunk_first())) {  // the state after the last step
    result->overflow_steps = ls->state.skipped;
    result->loss_scale = ls->state.scale;
  }
  finish_result(result, epochs.steps(), o.batch_size, epochs.train_seconds());
  if (!o.save_path.empty()) {  // --save: the trained parameters in the CPU trainer's layout and blocks
    auto params = job.read_params();
    if (!params.ok()) return params.status().with_context("--save");
    TROUPE_RETURN_IF_ERROR(save_trained_model(o, train, *params, *result));
    spdlog::info("model written to {}", o.save_path);
  }
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

  ChunkedEpochs epochs(o, train, job, steps_per_epoch, progress, result);
  TROUPE_RETURN_IF_ERROR(epochs.run());
  TROUPE_RETURN_IF_ERROR(finish_job(o, train, job, epochs, &result));
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
