#include "trainers/cuda/cuda_replica.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

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

// The replica's device state with its model and the host copy of the parameters (the start's,
// then the trained ones). Members go in the order the buffers must die: the parameters' host copy,
// then the drain (queued work finishes), then the model and the device buffers.
struct ReplicaDevice {
  struct Drain {  // on every way out, let queued work finish before the buffers are freed
    DeviceState& d;
    ~Drain() {
      if (d.stream.get() && d.done.get()) (void)finish(d, 120, "outstanding GPU work");
    }
  };
  DeviceState d;
  std::unique_ptr<CudaModel> model;
  Drain drain{d};
  std::vector<float> params;

  cuda_detail::DeviceTrainingState state() {
    return cuda_detail::DeviceTrainingState{params.size(), d.params.get(), d.state1.get(), d.state2.get()};
  }
};

// The checked shape of this replica's run: its share of the global batch, the steps of an epoch,
// the bound on each wait for the GPU.
struct ReplicaShape {
  int world = 1;
  int rank = 0;
  int local_batch = 0;
  int64_t steps_per_epoch = 0;
  int64_t features = 0;  // per training example
  double wait_s = 1;
};

Expected<ReplicaShape> shape_of(const TrainOptions& o, const Dataset& train, const CudaReplica& replica) {
  ReplicaShape shape;
  shape.world = replica.comm ? replica.comm->size() : 1;
  shape.rank = replica.comm ? replica.comm->rank() : 0;
  if (o.batch_size % shape.world != 0) {
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " (the global batch) does not divide "
                            "among " + std::to_string(shape.world) + " replicas");
  }
  shape.local_batch = o.batch_size / shape.world;
  shape.steps_per_epoch = train.count / o.batch_size;
  if (shape.steps_per_epoch == 0) {
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " is larger than the " +
                            std::to_string(train.count) + " training examples");
  }
  shape.features = train.features();
  shape.wait_s = std::max(1.0, replica.timeout.count() / 1000.0);
  return shape;
}

// The stream, the model and every buffer of the run, the optimizer's state zeroed.
Status allocate(ReplicaDevice& r, const ModelSpec& spec, const TrainOptions& o, const Dataset& train,
                const Dataset& test, int local_batch) {
  DeviceState& d = r.d;
  const size_t n = spec.initial.size();
  const int64_t features = train.features();
  TROUPE_RETURN_IF_ERROR(d.stream.create());
  TROUPE_RETURN_IF_ERROR(d.done.create());
  TROUPE_RETURN_IF_ERROR(d.blas.create(d.stream.get()));
  {
    auto m = spec.make(d.blas);
    if (!m.ok()) return m.status();
    r.model = std::move(*m);
  }
  TROUPE_RETURN_IF_ERROR(r.model->reserve(std::max(local_batch, kEvalRows)));
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
  return {};
}

// Where the run starts: step 0, or a resumed job's checkpoint.
struct StartAt {
  int64_t step = 0;        // steps done
  int first_epoch = 1;     // a resumed job goes on in the checkpoint's epoch
  int64_t skip_steps = 0;  //   after the steps of it already done
  int64_t applied = 0;     // optimizer steps taken
};

// The model's initial parameters on the device, or the checkpoint's state in their place.
Expected<StartAt> start_state(ReplicaDevice& r, const ModelSpec& spec, const TrainOptions& o,
                              const CudaReplica& replica, int64_t steps_per_epoch) {
  DeviceState& d = r.d;
  const size_t n = spec.initial.size();
  r.params = spec.initial;  // every replica starts identical (the CPU path's start too)
  TROUPE_RETURN_IF_ERROR(copy_to_device(d.params.get(), r.params.data(), n * sizeof(float), d.stream.get()));
  StartAt start;
  if (replica.resume) {
    const checkpoint::TrainingState& from = *replica.resume;
    TROUPE_RETURN_IF_ERROR(cuda_detail::restore_state(from, o, r.state(), d.stream.get())
                               .with_context("restoring the checkpoint of step " + std::to_string(from.step)));
    start.step = from.step;
    const checkpoint::ResumeAt at = checkpoint::resume_at(from, steps_per_epoch);
    start.first_epoch = at.epoch;
    start.skip_steps = at.skip_steps;
    spdlog::info("resuming from the checkpoint of step {}: epoch {} after {} of its steps", start.step,
                 start.first_epoch, start.skip_steps);
  }
  TROUPE_RETURN_IF_ERROR(replica.checkpoints.check());
  start.applied = replica.resume ? replica.resume->optimizer.steps : 0;
  return start;
}

// f16: dynamic loss scaling as the CPU replicas do it (trainers/optim/loss_scale.h), decided on the
// device from the all-reduced gradients (every replica alike); the scale starts afresh on resume,
// the optimizer's count of applied steps goes on from the checkpoint's.
Status start_loss_scale(ReplicaDevice& r, const LossScaleOptions& scale_options, int64_t applied) {
  DeviceState& d = r.d;
  TROUPE_RETURN_IF_ERROR(d.scale.allocate(1, "the loss scale"));
  TROUPE_RETURN_IF_ERROR(d.host_scale.allocate(1, "the loss scale"));
  d.host_scale[0] = kc::DeviceLossScale{};  // what the result reports if no step runs
  d.host_scale[0].state = loss_scale_start(scale_options);
  TROUPE_RETURN_IF_ERROR(kc::loss_scale_start(d.scale.get(), scale_options, applied, d.stream.get()));
  return r.model->set_loss_scale(kc::loss_scale_of(d.scale.get()));
}

// Everything on the device before the first step; failures surface here, not in step 1.
Expected<StartAt> set_up(ReplicaDevice& r, const ModelSpec& spec, const TrainOptions& o, const Dataset& train,
                         const Dataset& test, const CudaReplica& replica, const ReplicaShape& shape) {
  TROUPE_RETURN_IF_ERROR(allocate(r, spec, o, train, test, shape.local_batch));
  auto start = start_state(r, spec, o, replica, shape.steps_per_epoch);
  if (!start.ok()) return start.status();
  if (o.precision == DType::f16) TROUPE_RETURN_IF_ERROR(start_loss_scale(r, o.loss_scale_options(), start->applied));
  DeviceState& d = r.d;
  TROUPE_RETURN_IF_ERROR(copy_to_device(d.test_x.get(), test.images.data(), d.test_x.bytes(), d.stream.get()));
  TROUPE_RETURN_IF_ERROR(copy_to_device(d.test_y.get(), test.labels.data(), d.test_y.bytes(), d.stream.get()));
  TROUPE_RETURN_IF_ERROR(finish(d, shape.wait_s, "setting up on the GPU"));
  return start;
}

// The epochs of a set-up replica, each of steps that draw this replica's rows (draw), compute the
// gradients (forward_backward), all-reduce them with the step's loss and count (reduce), update
// on the device (update), then wait once and check, count and checkpoint the step.
class StepLoop {
 public:
  StepLoop(const TrainOptions& o, const Dataset& test, const CudaReplica& replica, const ProgressFn& progress,
           const ReplicaShape& shape, ReplicaDevice& r, BatchFeed& feed, const StartAt& start, TrainResult& result)
      : o_(o), test_(test), replica_(replica), progress_(progress), shape_(shape), r_(r), d_(r.d), feed_(feed),
        result_(result), scaled_(o.precision == DType::f16), scale_options_(o.loss_scale_options()),
        lr_(o.effective_lr()), s_(r.d.stream.get()), first_epoch_(start.first_epoch), skip_steps_(start.skip_steps),
        step_(start.step), applied_(start.applied) {
    parse_lr_schedule(o.lr_schedule, &schedule_);  // validated
    total_steps_ = o.max_steps > 0 ? std::min<int64_t>(o.max_steps, shape.steps_per_epoch * o.epochs)
                                   : shape.steps_per_epoch * o.epochs;
    co_.timeout = replica.timeout;
    co_.stream = s_;
    stop_ = o.max_steps > 0 && step_ >= o.max_steps;
  }

  // Every epoch from the start on; the result's history filled.
  Status run() {
    for (int epoch = first_epoch_; epoch <= o_.epochs && !stop_; ++epoch) TROUPE_RETURN_IF_ERROR(run_epoch(epoch));
    return {};
  }
  int64_t steps_done() const { return step_; }
  double train_seconds() const { return train_seconds_; }

 private:
  enum class Step { trained, skipped, epoch_ended };
  Status run_epoch(int epoch);
  // Step i of `epoch`: trained, skipped (done before the checkpoint this run resumed from), or the
  // epoch ended before it (a lone replica's feed ran out).
  Expected<Step> run_step(int epoch, int64_t i, EpochTally& tally);
  // The batch of step i in *batch; `trained` when it is to be trained.
  Expected<Step> draw(int epoch, int64_t i, const std::string& at, Batch* batch);
  Status forward_backward(const Batch& batch);
  Status reduce(const std::string& at);
  Status update(int64_t this_step);
  // After the step's one wait: its loss checked, f16's verdict taken, the step counted and
  // checkpointed.
  Status account(int epoch, int64_t i, const std::string& at, EpochTally& tally);

  const TrainOptions& o_;
  const Dataset& test_;
  const CudaReplica& replica_;
  const ProgressFn& progress_;
  const ReplicaShape& shape_;
  ReplicaDevice& r_;
  DeviceState& d_;
  BatchFeed& feed_;
  TrainResult& result_;
  const bool scaled_;  // f16: dynamic loss scaling, decided on the device
  const LossScaleOptions scale_options_;
  const float lr_;
  cudaStream_t s_;
  LrSchedule schedule_ = LrSchedule::constant;
  int64_t total_steps_ = 0;
  collectives::CollectiveOptions co_;
  const int first_epoch_;
  const int64_t skip_steps_;
  int64_t step_;     // steps done
  int64_t applied_;  // optimizer steps taken
  bool stop_ = false;
  double train_seconds_ = 0;
};

Status StepLoop::run_epoch(int epoch) {
  const auto epoch_start = Clock::now();
  if (epoch == first_epoch_ && skip_steps_ > 0) feed_.pass_over(skip_steps_);  // read for nothing
  TROUPE_RETURN_IF_ERROR(feed_.begin_epoch(epoch).with_context("data of epoch " + std::to_string(epoch)));
  EpochTally tally;
  for (int64_t i = 0; i < shape_.steps_per_epoch; ++i) {
    auto done = run_step(epoch, i, tally);
    if (!done.ok()) return done.status();
    if (*done == Step::epoch_ended) break;
    if (*done == Step::skipped) continue;
    if (progress_) {
      progress_(step_progress(o_, epoch, shape_.steps_per_epoch, tally, seconds_since(epoch_start),
                              total_steps_ - step_));
    }
    if (o_.max_steps > 0 && step_ >= o_.max_steps) {
      stop_ = true;
      break;
    }
  }
  TROUPE_RETURN_IF_ERROR(finish(d_, shape_.wait_s, "the optimizer steps of epoch " + std::to_string(epoch)));
  TROUPE_RETURN_IF_ERROR(feed_.end_epoch().with_context("data of epoch " + std::to_string(epoch)));
  const double epoch_seconds = seconds_since(epoch_start);
  train_seconds_ += epoch_seconds;
  EpochStats es = epoch_stats(epoch, tally, o_.batch_size, epoch_seconds);
  if (o_.evaluate_each_epoch || epoch == o_.epochs || stop_) {
    auto acc = evaluate(d_, *r_.model, test_, shape_.wait_s);
    if (!acc.ok()) return acc.status().with_context("evaluating after epoch " + std::to_string(epoch));
    es.test_accuracy = *acc;
  }
  report_epoch(es, o_, shape_.steps_per_epoch, &result_, progress_);
  return {};
}

Expected<StepLoop::Step> StepLoop::run_step(int epoch, int64_t i, EpochTally& tally) {
  const std::string at = "epoch " + std::to_string(epoch) + ", step " + std::to_string(i + 1);
  Batch batch;
  auto drawn = draw(epoch, i, at, &batch);
  if (!drawn.ok() || *drawn != Step::trained) return drawn;
  TROUPE_RETURN_IF_ERROR(forward_backward(batch));
  TROUPE_RETURN_IF_ERROR(reduce(at));
  TROUPE_RETURN_IF_ERROR(update(step_ + 1));
  TROUPE_RETURN_IF_ERROR(finish(d_, shape_.wait_s, "training step " + at));  // the step's one wait
  TROUPE_RETURN_IF_ERROR(account(epoch, i, at, tally));
  return Step::trained;
}

Expected<StepLoop::Step> StepLoop::draw(int epoch, int64_t i, const std::string& at, Batch* batch) {
  if (replica_.cancel && replica_.cancel->load()) return unavailable("stopped at " + at);
  auto more = feed_.next(batch);
  if (!more.ok()) return more.status().with_context("data of epoch " + std::to_string(epoch));
  if (!*more && shape_.world > 1) return internal_error("the data feed ran out at " + at);
  if (!*more) return Step::epoch_ended;
  if (batch->size != shape_.local_batch) {
    return internal_error("the data feed gave a batch of " + std::to_string(batch->size) + " examples; each "
                          "replica trains " + std::to_string(shape_.local_batch) + " per step");
  }
  if (epoch == first_epoch_ && i < skip_steps_) {  // trained before the checkpoint this run resumed from
    TROUPE_RETURN_IF_ERROR(feed_.trained().with_context("data of epoch " + std::to_string(epoch)));
    return Step::skipped;
  }
  return Step::trained;
}

// The batch in through pinned memory (the previous step's copies finished: the step ended with a
// wait), the loss and count slots zeroed (the model adds to them).
Status StepLoop::forward_backward(const Batch& batch) {
  const int local_batch = shape_.local_batch;
  const int64_t features = shape_.features;
  std::memcpy(d_.host_x.get(), batch.inputs, static_cast<size_t>(local_batch) * features * sizeof(float));
  std::memcpy(d_.host_y.get(), batch.labels, static_cast<size_t>(local_batch) * sizeof(int32_t));
  TROUPE_RETURN_IF_ERROR(copy_to_device(d_.x.get(), d_.host_x.get(), d_.x.bytes(), s_));
  TROUPE_RETURN_IF_ERROR(copy_to_device(d_.y.get(), d_.host_y.get(), d_.y.bytes(), s_));
  TROUPE_CUDA_CHECK(cudaMemsetAsync(d_.loss.get(), 0, sizeof(float), s_));
  TROUPE_CUDA_CHECK(cudaMemsetAsync(d_.correct.get(), 0, sizeof(unsigned long long), s_));
  return r_.model->forward_backward(d_.params.get(), d_.x.get(), d_.y.get(), local_batch, d_.grads.get(),
                                    d_.loss.get(), d_.correct.get());
}

Status StepLoop::reduce(const std::string& at) {
  const size_t n = r_.params.size();
  if (replica_.comm) {
    // The loss and the count ride in the two slots after the gradients (packed on the device):
    // one all-reduce a step, and the host waits once, at the end of the step.
    TROUPE_RETURN_IF_ERROR(kc::pack_step_slots(d_.loss.get(), d_.correct.get(), d_.grads.get() + n, s_));
    Status st = replica_.comm->allreduce(d_.grads.get(), d_.grads.get(), n + 2, DType::f32,
                                         collectives::ReduceOp::avg, co_);
    if (!st.ok()) return st.with_context("all-reducing gradients on the GPU at " + at);
    TROUPE_RETURN_IF_ERROR(copy_to_host(d_.host_slots.get(), d_.grads.get() + n, 2 * sizeof(float), s_));
  } else {
    TROUPE_RETURN_IF_ERROR(copy_to_host(d_.host_slots.get(), d_.loss.get(), sizeof(float), s_));
    TROUPE_RETURN_IF_ERROR(copy_to_host(d_.host_correct.get(), d_.correct.get(), sizeof(unsigned long long), s_));
  }
  return {};
}

// Adam's bias correction counts the optimizer's applied steps, as the CPU optimizers do (and
// checkpoints carry): f16's gate supplies the count (offset, the job step, names a give-up);
// otherwise every step applies. The rate comes from the host (hp.lr).
Status StepLoop::update(int64_t this_step) {
  const size_t n = r_.params.size();
  kc::DeviceStep when;
  when.offset = scaled_ ? this_step : applied_ + 1;
  if (scaled_) {  // decided on the all-reduced gradients: every replica alike
    when.gate = d_.scale.get();
    TROUPE_RETURN_IF_ERROR(kc::loss_scale_check(d_.grads.get(), n, d_.scale.get(), scale_options_, when, s_));
    TROUPE_RETURN_IF_ERROR(copy_to_host(d_.host_scale.get(), d_.scale.get(), sizeof(kc::DeviceLossScale), s_));
  }
  const float rate = scheduled_lr(schedule_, lr_, this_step - 1, total_steps_, o_.warmup_steps);
  if (o_.optimizer == "sgd") {
    kc::SgdParams hp;
    hp.lr = rate;
    hp.momentum = o_.momentum;
    hp.weight_decay = o_.weight_decay;
    return kc::sgd_step(d_.params.get(), d_.grads.get(), d_.state1.get(), n, hp, when, s_);
  }
  kc::AdamParams hp;
  hp.lr = rate;
  hp.weight_decay = o_.weight_decay;
  hp.decoupled = o_.optimizer == "adamw";
  return kc::adam_step(d_.params.get(), d_.grads.get(), d_.state1.get(), d_.state2.get(), n, when, hp, s_);
}

Status StepLoop::account(int epoch, int64_t i, const std::string& at, EpochTally& tally) {
  float loss = d_.host_slots[0];
  int64_t correct = replica_.comm ? std::llround(static_cast<double>(d_.host_slots[1]) * shape_.world)
                                  : static_cast<int64_t>(d_.host_correct[0]);
  ++step_;
  // A non-finite loss or f16 giving up ends the job here (the update already queued does not
  // matter: nothing of this run is kept).
  if (step_ % o_.loss_check_every == 0 && !std::isfinite(loss))
    return nonfinite_loss(loss, epoch, i + 1, shape_.steps_per_epoch, step_, lr_);
  if (scaled_) {
    const kc::DeviceLossScale& ls = d_.host_scale[0];
    if (ls.failed_step != 0)
      return loss_scale_gave_up(ls.failed_in_a_row, ls.failed_scale).with_context(result_.device + " at " + at);
    applied_ = ls.applied;
  } else {
    ++applied_;
  }
  TROUPE_RETURN_IF_ERROR(feed_.trained().with_context("data of epoch " + std::to_string(epoch)));
  tally.add(loss, correct);
  if (replica_.checkpoints.every > 0 && step_ % replica_.checkpoints.every == 0) {
    const checkpoint::ReplicaPoint point{replica_.checkpoints.tag, step_, epoch, i + 1};
    TROUPE_RETURN_IF_ERROR(
        cuda_detail::write_state(replica_, point, applied_, o_, r_.state(), s_, shape_.wait_s).with_context(at));
  }
  return {};
}

// The end of a run: the trained parameters read back into r.params and checked finite, the
// result's loss-scale counts and totals.
Status finish_run(ReplicaDevice& r, const TrainOptions& o, const StepLoop& loop, double wait_s, TrainResult* result) {
  DeviceState& d = r.d;
  const size_t n = r.params.size();
  TROUPE_CUDA_CHECK(
      cudaMemcpyAsync(r.params.data(), d.params.get(), n * sizeof(float), cudaMemcpyDeviceToHost, d.stream.get()));
  TROUPE_RETURN_IF_ERROR(finish(d, wait_s, "reading the trained parameters"));
  for (float p : r.params) {
    if (!std::isfinite(p))
      return numeric_error("parameters are not finite after training on " + result->device + "; lower --lr (" +
                           std::to_string(o.effective_lr()) + ")");
  }
  if (o.precision == DType::f16) {
    result->overflow_steps = d.host_scale[0].state.skipped;
    result->loss_scale = d.host_scale[0].state.scale;
  }
  finish_result(result, loop.steps_done(), o.batch_size, loop.train_seconds());
  return {};
}

}  // namespace

Expected<TrainResult> train_replica_cuda(const TrainOptions& o, const Dataset& train, const Dataset& test,
                                         const CudaReplica& replica, const ProgressFn& progress,
                                         std::vector<float>* final_params) {
  const auto job_start = Clock::now();
  TROUPE_RETURN_IF_ERROR(o.validate());
  auto spec = model_for(o, train);
  if (!spec.ok()) return spec.status();
  auto shape = shape_of(o, train, replica);
  if (!shape.ok()) return shape.status();
  TROUPE_RETURN_IF_ERROR(kc::select_device(replica.device));
  ReplicaDevice r;
  auto start = set_up(r, *spec, o, train, test, replica, *shape);
  if (!start.ok()) return start.status();

  TrainResult result;
  result.model = spec->name;
  result.precision = dtype_name(o.precision);
  result.device = "cuda:" + std::to_string(replica.device) + " (" + kc::device_name(replica.device) + ")";
  spdlog::info("replica {} of {} training {} on {} with {}, {} steps/epoch, gradients through {}", shape->rank,
               shape->world, result.model, result.device, o.optimizer, shape->steps_per_epoch,
               replica.comm ? replica.comm->path() : std::string("nothing (one replica)"));
  SliceFeed slices(train, o.seed, o.batch_size, shape->rank, shape->world);
  BatchFeed& feed = replica.feed ? *replica.feed : slices;
  StepLoop loop(o, test, replica, progress, *shape, r, feed, *start, result);
  TROUPE_RETURN_IF_ERROR(loop.run());
  TROUPE_RETURN_IF_ERROR(finish_run(r, o, loop, shape->wait_s, &result));
  result.wall_seconds = seconds_since(job_start);
  if (final_params) *final_params = std::move(r.params);
  return result;
}

}  // namespace troupe
