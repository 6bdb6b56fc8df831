#include "trainers/cuda/cuda_replica.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/loss_scale_ops.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/runtime.h"
#include "trainers/cuda/cuda_job.h"
#include "trainers/cuda/model_spec.h"
#include "trainers/cuda/replica_state.h"
#include "trainers/report/epoch_report.h"
#include "trainers/setup/gpu_options.h"
#include "trainers/optim/loss_scale.h"
#include "trainers/optim/lr_schedule.h"
#include "trainers/sync/trainer_driver.h"

namespace troupe {
namespace {

namespace kc = kernels::cuda;
using Clock = std::chrono::steady_clock;

using cuda_detail::kEvalRows;  // rows per evaluation pass, as the one-device GPU trainer

// The model to train on the GPU (cuda_model_spec), with what this path does not take refused.
Expected<ModelSpec> model_for(const TrainOptions& o, const Dataset& train) {
  TROUPE_RETURN_IF_ERROR(check_gpu_worker_options(o));
  return cuda_model_spec(o, train.spec());
}

// The replica's device state: parameters, gradients (+ two slots: the step's loss and correct
// count, all-reduced with them), optimizer state, the batch and the test set.
struct DeviceState {
  kc::Stream stream;
  kc::CublasHandle blas;
  kc::DeviceBuffer<float> params, grads, state1, state2, x, test_x;
  kc::DeviceBuffer<int32_t> y, test_y;
  kc::DeviceBuffer<float> loss;
  kc::DeviceBuffer<unsigned long long> correct;
  kc::PinnedBuffer<float> host_x, host_slots;
  kc::PinnedBuffer<int32_t> host_y;
  kc::PinnedBuffer<unsigned long long> host_correct;
  kc::DeviceBuffer<kc::DeviceLossScale> scale;  // f16 only: the loss scale, decided on the device
  kc::PinnedBuffer<kc::DeviceLossScale> host_scale;
  kc::Event done;
};

Status copy_to_device(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
  return {};
}
Status copy_to_host(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
  return {};
}
// Waits (bounded) for everything queued on the state's stream.
Status finish(DeviceState& d, double seconds, const std::string& what) {
  TROUPE_CUDA_CHECK(cudaEventRecord(d.done.get(), d.stream.get()));
  return kc::wait_event(d.done.get(), seconds, what);
}

Expected<double> evaluate(DeviceState& d, CudaModel& model, const Dataset& test, double seconds) {
  const int64_t features = test.features();
  TROUPE_CUDA_CHECK(cudaMemsetAsync(d.correct.get(), 0, sizeof(unsigned long long), d.stream.get()));
  for (int64_t begin = 0; begin < test.count; begin += kEvalRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kEvalRows, test.count - begin));
    TROUPE_RETURN_IF_ERROR(model.evaluate(d.params.get(), d.test_x.get() + begin * features, d.test_y.get() + begin,
                                          rows, nullptr, d.correct.get()));
  }
  TROUPE_RETURN_IF_ERROR(copy_to_host(d.host_correct.get(), d.correct.get(), sizeof(unsigned long long),
                                      d.stream.get()));
  TROUPE_RETURN_IF_ERROR(finish(d, seconds, "the test-set evaluation"));
  return test.count ? static_cast<double>(d.host_correct[0]) / test.count : 0.0;
}

}  // namespace

Expected<TrainResult> train_replica_cuda(const TrainOptions& o, const Dataset& train, const Dataset& test,
                                         const CudaReplica& replica, const ProgressFn& progress,
                                         std::vector<float>* final_params) {
  const auto job_start = Clock::now();
  TROUPE_RETURN_IF_ERROR(o.validate());
  auto spec = model_for(o, train);
  if (!spec.ok()) return spec.status();
  const int world = replica.comm ? replica.comm->size() : 1;
  const int rank = replica.comm ? replica.comm->rank() : 0;
  if (o.batch_size % world != 0) {
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " (the global batch) does not divide "
                            "among " + std::to_string(world) + " replicas");
  }
  const int local_batch = o.batch_size / world;
  const int64_t steps_per_epoch = train.count / o.batch_size;
  if (steps_per_epoch == 0) {
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " is larger than the " +
                            std::to_string(train.count) + " training examples");
  }
  const double wait_s = std::max(1.0, replica.timeout.count() / 1000.0);
  TROUPE_RETURN_IF_ERROR(kc::select_device(replica.device));

  const size_t n = spec->initial.size();
  const int64_t features = train.features();
  DeviceState d;
  std::unique_ptr<CudaModel> made;
  struct Drain {  // on every way out, let queued work finish before the buffers are freed
    DeviceState& d;
    ~Drain() {
      if (d.stream.get() && d.done.get()) (void)finish(d, 120, "outstanding GPU work");
    }
  } drain{d};
  TROUPE_RETURN_IF_ERROR(d.stream.create());
  TROUPE_RETURN_IF_ERROR(d.done.create());
  TROUPE_RETURN_IF_ERROR(d.blas.create(d.stream.get()));
  {
    auto m = spec->make(d.blas);
    if (!m.ok()) return m.status();
    made = std::move(*m);
  }
  CudaModel& model = *made;
  TROUPE_RETURN_IF_ERROR(model.reserve(std::max(local_batch, kEvalRows)));
  TROUPE_RETURN_IF_ERROR(d.params.allocate(n, "parameters"));
  TROUPE_RETURN_IF_ERROR(d.grads.allocate(n + 2, "gradients"));
  TROUPE_RETURN_IF_ERROR(d.x.allocate(static_cast<size_t>(local_batch) * features, "the batch"));
  TROUPE_RETURN_IF_ERROR(d.y.allocate(static_cast<size_t>(local_batch), "the batch's labels"));
  TROUPE_RETURN_IF_ERROR(d.test_x.allocate(test.images.size(), "the test set"));
  TROUPE_RETURN_IF_ERROR(d.test_y.allocate(test.labels.size(), "the test set"));
  TROUPE_RETURN_IF_ERROR(d.loss.allocate(1, "the step's loss"));
  TROUPE_RETURN_IF_ERROR(d.correct.allocate(1, "the step's correct count"));
  TROUPE_RETURN_IF_ERROR(d.host_x.allocate(static_cast<size_t>(local_batch) * features, "the batch"));
  TROUPE_RETURN_IF_ERROR(d.host_y.allocate(static_cast<size_t>(local_batch), "the batch's labels"));
  TROUPE_RETURN_IF_ERROR(d.host_slots.allocate(2, "the step's loss"));
  TROUPE_RETURN_IF_ERROR(d.host_correct.allocate(1, "the step's correct count"));
  const bool adam = o.optimizer != "sgd";
  if (adam || o.momentum != 0.0f) {
    TROUPE_RETURN_IF_ERROR(d.state1.allocate(n, "optimizer state"));
    TROUPE_CUDA_CHECK(cudaMemsetAsync(d.state1.get(), 0, d.state1.bytes(), d.stream.get()));
  }
  if (adam) {
    TROUPE_RETURN_IF_ERROR(d.state2.allocate(n, "optimizer state"));
    TROUPE_CUDA_CHECK(cudaMemsetAsync(d.state2.get(), 0, d.state2.bytes(), d.stream.get()));
  }
  std::vector<float> params = spec->initial;  // every replica starts identical (the CPU path's start too)
  TROUPE_RETURN_IF_ERROR(copy_to_device(d.params.get(), params.data(), n * sizeof(float), d.stream.get()));
  const cuda_detail::DeviceTrainingState state{n, d.params.get(), d.state1.get(), d.state2.get()};
  int64_t step = 0;         // steps done
  int first_epoch = 1;      // a resumed job goes on in the checkpoint's epoch
  int64_t skip_steps = 0;   //   after the steps of it already done
  if (replica.resume) {
    const checkpoint::TrainingState& r = *replica.resume;
    TROUPE_RETURN_IF_ERROR(cuda_detail::restore_state(r, o, state, d.stream.get())
                               .with_context("restoring the checkpoint of step " + std::to_string(r.step)));
    step = r.step;
    const checkpoint::ResumeAt at = checkpoint::resume_at(r, steps_per_epoch);
    first_epoch = at.epoch;
    skip_steps = at.skip_steps;
    spdlog::info("resuming from the checkpoint of step {}: epoch {} after {} of its steps", step, first_epoch,
                 skip_steps);
  }
  TROUPE_RETURN_IF_ERROR(replica.checkpoints.check());
  // f16: dynamic loss scaling as the CPU replicas do it (trainers/optim/loss_scale.h), decided on the
  // device from the all-reduced gradients (every replica alike); the scale starts afresh on resume,
  // the optimizer's count of applied steps goes on from the checkpoint's.
  const bool scaled = o.precision == DType::f16;
  const LossScaleOptions scale_options = o.loss_scale_options();
  int64_t applied = replica.resume ? replica.resume->optimizer.steps : 0;  // optimizer steps taken
  if (scaled) {
    TROUPE_RETURN_IF_ERROR(d.scale.allocate(1, "the loss scale"));
    TROUPE_RETURN_IF_ERROR(d.host_scale.allocate(1, "the loss scale"));
    d.host_scale[0] = kc::DeviceLossScale{};  // what the result reports if no step runs
    d.host_scale[0].state = loss_scale_start(scale_options);
    TROUPE_RETURN_IF_ERROR(kc::loss_scale_start(d.scale.get(), scale_options, applied, d.stream.get()));
    TROUPE_RETURN_IF_ERROR(model.set_loss_scale(kc::loss_scale_of(d.scale.get())));
  }
  TROUPE_RETURN_IF_ERROR(copy_to_device(d.test_x.get(), test.images.data(), d.test_x.bytes(), d.stream.get()));
  TROUPE_RETURN_IF_ERROR(copy_to_device(d.test_y.get(), test.labels.data(), d.test_y.bytes(), d.stream.get()));
  TROUPE_RETURN_IF_ERROR(finish(d, wait_s, "setting up on the GPU"));  // failures surface here, not in step 1

  TrainResult result;
  result.model = spec->name;
  result.precision = dtype_name(o.precision);
  result.device = "cuda:" + std::to_string(replica.device) + " (" + kc::device_name(replica.device) + ")";
  spdlog::info("replica {} of {} training {} on {} with {}, {} steps/epoch, gradients through {}", rank, world,
               result.model, result.device, o.optimizer, steps_per_epoch,
               replica.comm ? replica.comm->path() : std::string("nothing (one replica)"));

  LrSchedule schedule = LrSchedule::constant;
  parse_lr_schedule(o.lr_schedule, &schedule);  // validated
  const float lr = o.effective_lr();
  const int64_t total_steps =
      o.max_steps > 0 ? std::min<int64_t>(o.max_steps, steps_per_epoch * o.epochs) : steps_per_epoch * o.epochs;
  SliceFeed slices(train, o.seed, o.batch_size, rank, world);
  BatchFeed& feed = replica.feed ? *replica.feed : slices;
  collectives::CollectiveOptions co;
  co.timeout = replica.timeout;
  co.stream = d.stream.get();
  cudaStream_t s = d.stream.get();
  double train_seconds = 0;
  bool stop = o.max_steps > 0 && step >= o.max_steps;

  for (int epoch = first_epoch; epoch <= o.epochs && !stop; ++epoch) {
    const auto epoch_start = Clock::now();
    TROUPE_RETURN_IF_ERROR(feed.begin_epoch(epoch).with_context("data of epoch " + std::to_string(epoch)));
    EpochTally tally;
    for (int64_t i = 0; i < steps_per_epoch; ++i) {
      const std::string at = "epoch " + std::to_string(epoch) + ", step " + std::to_string(i + 1);
      if (replica.cancel && replica.cancel->load()) return unavailable("stopped at " + at);
      Batch batch;
      auto more = feed.next(&batch);
      if (!more.ok()) return more.status().with_context("data of epoch " + std::to_string(epoch));
      if (!*more && world > 1) return internal_error("the data feed ran out at " + at);
      if (!*more) break;
      if (batch.size != local_batch) {
        return internal_error("the data feed gave a batch of " + std::to_string(batch.size) + " examples; each "
                              "replica trains " + std::to_string(local_batch) + " per step");
      }
      if (epoch == first_epoch && i < skip_steps) {  // trained before the checkpoint this run resumed from
        TROUPE_RETURN_IF_ERROR(feed.trained().with_context("data of epoch " + std::to_string(epoch)));
        continue;
      }
      // The batch in through pinned memory (the previous step's copies finished: the step ended
      // with a wait), the loss and count slots zeroed (the model adds to them).
      std::memcpy(d.host_x.get(), batch.inputs, static_cast<size_t>(local_batch) * features * sizeof(float));
      std::memcpy(d.host_y.get(), batch.labels, static_cast<size_t>(local_batch) * sizeof(int32_t));
      TROUPE_RETURN_IF_ERROR(copy_to_device(d.x.get(), d.host_x.get(), d.x.bytes(), s));
      TROUPE_RETURN_IF_ERROR(copy_to_device(d.y.get(), d.host_y.get(), d.y.bytes(), s));
      TROUPE_CUDA_CHECK(cudaMemsetAsync(d.loss.get(), 0, sizeof(float), s));
      TROUPE_CUDA_CHECK(cudaMemsetAsync(d.correct.get(), 0, sizeof(unsigned long long), s));
      TROUPE_RETURN_IF_ERROR(model.forward_backward(d.params.get(), d.x.get(), d.y.get(), local_batch, d.grads.get(),
                                                    d.loss.get(), d.correct.get()));
      const int64_t this_step = step + 1;
      if (replica.comm) {
        // The loss and the count ride in the two slots after the gradients (packed on the device):
        // one all-reduce a step, and the host waits once, at the end of the step.
        TROUPE_RETURN_IF_ERROR(kc::pack_step_slots(d.loss.get(), d.correct.get(), d.grads.get() + n, s));
        Status st = replica.comm->allreduce(d.grads.get(), d.grads.get(), n + 2, DType::f32,
                                            collectives::ReduceOp::avg, co);
        if (!st.ok()) return st.with_context("all-reducing gradients on the GPU at " + at);
        TROUPE_RETURN_IF_ERROR(copy_to_host(d.host_slots.get(), d.grads.get() + n, 2 * sizeof(float), s));
      } else {
        TROUPE_RETURN_IF_ERROR(copy_to_host(d.host_slots.get(), d.loss.get(), sizeof(float), s));
        TROUPE_RETURN_IF_ERROR(copy_to_host(d.host_correct.get(), d.correct.get(), sizeof(unsigned long long), s));
      }
      // Adam's bias correction counts the optimizer's applied steps, as the CPU optimizers do (and
      // checkpoints carry): f16's gate supplies the count (offset, the job step, names a give-up);
      // otherwise every step applies. The rate comes from the host (hp.lr).
      kc::DeviceStep when;
      when.offset = scaled ? this_step : applied + 1;
      if (scaled) {  // decided on the all-reduced gradients: every replica alike
        when.gate = d.scale.get();
        TROUPE_RETURN_IF_ERROR(kc::loss_scale_check(d.grads.get(), n, d.scale.get(), scale_options, when, s));
        TROUPE_RETURN_IF_ERROR(copy_to_host(d.host_scale.get(), d.scale.get(), sizeof(kc::DeviceLossScale), s));
      }
      const float rate = scheduled_lr(schedule, lr, this_step - 1, total_steps, o.warmup_steps);
      if (o.optimizer == "sgd") {
        kc::SgdParams hp;
        hp.lr = rate;
        hp.momentum = o.momentum;
        hp.weight_decay = o.weight_decay;
        TROUPE_RETURN_IF_ERROR(kc::sgd_step(d.params.get(), d.grads.get(), d.state1.get(), n, hp, when, s));
      } else {
        kc::AdamParams hp;
        hp.lr = rate;
        hp.weight_decay = o.weight_decay;
        hp.decoupled = o.optimizer == "adamw";
        TROUPE_RETURN_IF_ERROR(kc::adam_step(d.params.get(), d.grads.get(), d.state1.get(), d.state2.get(), n, when,
                                             hp, s));
      }
      TROUPE_RETURN_IF_ERROR(finish(d, wait_s, "training step " + at));  // the step's one wait
      float loss = d.host_slots[0];
      int64_t correct = replica.comm ? std::llround(static_cast<double>(d.host_slots[1]) * world)
                                     : static_cast<int64_t>(d.host_correct[0]);
      step = this_step;
      // A non-finite loss or f16 giving up ends the job here (the update already queued does not
      // matter: nothing of this run is kept).
      if (step % o.loss_check_every == 0 && !std::isfinite(loss))
        return nonfinite_loss(loss, epoch, i + 1, steps_per_epoch, step, lr);
      if (scaled) {
        const kc::DeviceLossScale& ls = d.host_scale[0];
        if (ls.failed_step != 0)
          return loss_scale_gave_up(ls.failed_in_a_row, ls.failed_scale).with_context(result.device + " at " + at);
        applied = ls.applied;
      } else {
        ++applied;
      }
      TROUPE_RETURN_IF_ERROR(feed.trained().with_context("data of epoch " + std::to_string(epoch)));
      tally.add(loss, correct);
      if (replica.checkpoints.every > 0 && step % replica.checkpoints.every == 0) {
        const checkpoint::ReplicaPoint point{replica.checkpoints.tag, step, epoch, i + 1};
        TROUPE_RETURN_IF_ERROR(
            cuda_detail::write_state(replica, point, applied, o, state, s, wait_s).with_context(at));
      }
      if (progress) {
        progress(step_progress(o, epoch, steps_per_epoch, tally, seconds_since(epoch_start), total_steps - step));
      }
      if (o.max_steps > 0 && step >= o.max_steps) {
        stop = true;
        break;
      }
    }
    TROUPE_RETURN_IF_ERROR(finish(d, wait_s, "the optimizer steps of epoch " + std::to_string(epoch)));
    TROUPE_RETURN_IF_ERROR(feed.end_epoch().with_context("data of epoch " + std::to_string(epoch)));
    const double epoch_seconds = seconds_since(epoch_start);
    train_seconds += epoch_seconds;
    EpochStats es = epoch_stats(epoch, tally, o.batch_size, epoch_seconds);
    if (o.evaluate_each_epoch || epoch == o.epochs || stop) {
      auto acc = evaluate(d, model, test, wait_s);
      if (!acc.ok()) return acc.status().with_context("evaluating after epoch " + std::to_string(epoch));
      es.test_accuracy = *acc;
    }
    report_epoch(es, o, steps_per_epoch, &result, progress);
  }
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(params.data(), d.params.get(), n * sizeof(float), cudaMemcpyDeviceToHost, s));
  TROUPE_RETURN_IF_ERROR(finish(d, wait_s, "reading the trained parameters"));
  for (float p : params) {
    if (!std::isfinite(p))
      return numeric_error("parameters are not finite after training on " + result.device + "; lower --lr (" +
                           std::to_string(lr) + ")");
  }
  if (scaled) {
    result.overflow_steps = d.host_scale[0].state.skipped;
    result.loss_scale = d.host_scale[0].state.scale;
  }
  finish_result(&result, step, o.batch_size, train_seconds);
  result.wall_seconds = seconds_since(job_start);
  if (final_params) *final_params = std::move(params);
  return result;
}

}  // namespace troupe
