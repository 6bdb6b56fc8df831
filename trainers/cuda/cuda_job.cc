#include "trainers/cuda/cuda_job.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/ops.h"
#include "trainers/optim/lr_schedule.h"

namespace troupe::cuda_detail {

static Status upload(const Dataset& d, DeviceDataset* out, const char* what) {
  out->count = d.count;
  TROUPE_RETURN_IF_ERROR(out->images.allocate(d.images.size(), what));
  TROUPE_RETURN_IF_ERROR(out->labels.allocate(d.labels.size(), what));
  TROUPE_CUDA_CHECK(cudaMemcpy(out->images.get(), d.images.data(), out->images.bytes(), cudaMemcpyHostToDevice));
  TROUPE_CUDA_CHECK(cudaMemcpy(out->labels.get(), d.labels.data(), out->labels.bytes(), cudaMemcpyHostToDevice));
  return {};
}

Status CudaJob::setup(const Dataset& train, const Dataset& test) {
  TROUPE_RETURN_IF_ERROR(stream_.create());
  TROUPE_RETURN_IF_ERROR(blas_.create(stream_.get()));
  auto model = spec_.make(blas_);
  if (!model.ok()) return model.status();
  model_ = std::move(*model);
  TROUPE_RETURN_IF_ERROR(model_->reserve(std::max(o_.batch_size, kEvalRows)));
  TROUPE_RETURN_IF_ERROR(upload(train, &train_, "the training set"));
  TROUPE_RETURN_IF_ERROR(upload(test, &test_, "the test set"));

  const size_t n = param_count();
  TROUPE_RETURN_IF_ERROR(params_.allocate(n, "parameters"));
  TROUPE_RETURN_IF_ERROR(grads_.allocate(n, "gradients"));
  TROUPE_CUDA_CHECK(cudaMemcpy(params_.get(), spec_.initial.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const bool adam = o_.optimizer != "sgd";
  if (adam || o_.momentum != 0.0f) {
    TROUPE_RETURN_IF_ERROR(state1_.allocate(n, "optimizer state"));
    TROUPE_CUDA_CHECK(cudaMemset(state1_.get(), 0, state1_.bytes()));
  }
  if (adam) {
    TROUPE_RETURN_IF_ERROR(state2_.allocate(n, "optimizer state"));
    TROUPE_CUDA_CHECK(cudaMemset(state2_.get(), 0, state2_.bytes()));
  }
  TROUPE_RETURN_IF_ERROR(steps_done_.allocate(1, "the step counter"));
  TROUPE_CUDA_CHECK(cudaMemset(steps_done_.get(), 0, sizeof(int64_t)));
  // The schedule's rate for every step, computed as the CPU trainer does (same floats), so graphs
  // look the rate up instead of being re-captured.
  const int64_t total_steps = o_.max_steps > 0 ? std::min<int64_t>(o_.max_steps, steps_per_epoch_ * o_.epochs)
                                               : steps_per_epoch_ * o_.epochs;
  LrSchedule schedule = LrSchedule::constant;
  if (!parse_lr_schedule(o_.lr_schedule, &schedule)) {
    return invalid_argument("--lr-schedule '" + o_.lr_schedule + "' is not one of constant, cosine");
  }
  std::vector<float> rates(static_cast<size_t>(total_steps));
  for (int64_t i = 0; i < total_steps; ++i) rates[i] = scheduled_lr(schedule, o_.effective_lr(), i, total_steps, o_.warmup_steps);
  TROUPE_RETURN_IF_ERROR(lr_table_.allocate(rates.size(), "the learning-rate schedule"));
  TROUPE_CUDA_CHECK(cudaMemcpy(lr_table_.get(), rates.data(), rates.size() * sizeof(float), cudaMemcpyHostToDevice));

  const int64_t epoch_rows = steps_per_epoch_ * o_.batch_size;
  TROUPE_RETURN_IF_ERROR(perm_.allocate(train.count, "the epoch permutation"));
  TROUPE_RETURN_IF_ERROR(epoch_images_.allocate(epoch_rows * train.features(), "the shuffled epoch"));
  TROUPE_RETURN_IF_ERROR(epoch_labels_.allocate(epoch_rows, "the shuffled epoch"));
  TROUPE_RETURN_IF_ERROR(step_loss_.allocate(steps_per_epoch_, "per-step losses"));
  TROUPE_RETURN_IF_ERROR(step_correct_.allocate(steps_per_epoch_, "per-step counts"));
  TROUPE_RETURN_IF_ERROR(eval_correct_.allocate(1, "the evaluation count"));
  TROUPE_RETURN_IF_ERROR(host_perm_.allocate(train.count, "the epoch permutation"));
  TROUPE_RETURN_IF_ERROR(host_loss_.allocate(steps_per_epoch_, "per-step losses"));
  TROUPE_RETURN_IF_ERROR(host_correct_.allocate(steps_per_epoch_, "per-step counts"));
  if (scaled()) {  // f16: the model multiplies its loss gradient by the device's current scale
    scale_options_ = o_.loss_scale_options();
    TROUPE_RETURN_IF_ERROR(loss_scale_.allocate(1, "the loss scale"));
    TROUPE_RETURN_IF_ERROR(host_scale_.allocate(2, "the loss scale"));
    TROUPE_RETURN_IF_ERROR(kc::loss_scale_start(loss_scale_.get(), scale_options_, 0, stream()));
    TROUPE_RETURN_IF_ERROR(model_->set_loss_scale(kc::loss_scale_of(loss_scale_.get())));
  }
  TROUPE_CUDA_CHECK(cudaDeviceSynchronize());  // setup is done; failures surface here, not in step 1

  if (o_.cuda_graphs) TROUPE_RETURN_IF_ERROR(capture_graphs());
  return {};
}

Status CudaJob::capture_graphs() {
  // One eager forward + backward on the first rows first (gradients only: the parameters do not
  // move), so every kernel and library path the step takes has been loaded and has set itself up
  // before it is recorded.
  TROUPE_RETURN_IF_ERROR(model_->forward_backward(params_.get(), train_.images.get(), train_.labels.get(),
                                                  o_.batch_size, grads_.get(), nullptr, nullptr));
  TROUPE_CUDA_CHECK(cudaStreamSynchronize(stream()));
  // Capture every full-length chunk a job will run: all chunks of an epoch, or those max_steps
  // reaches. Capturing enqueues nothing, so this is like compiling the step.
  const int64_t needed = o_.max_steps > 0 ? std::min(o_.max_steps, steps_per_epoch_) : steps_per_epoch_;
  for (int64_t first = 0; first < needed; first += kStepsPerChunk) {
    const int64_t count = std::min(kStepsPerChunk, steps_per_epoch_ - first);
    kc::GraphExec g;
    Status st = g.capture(stream_.get(), [&](cudaStream_t) { return enqueue_steps(first, count); });
    if (!st.ok()) {
      // A library call that refuses capture is not a reason to fail the job: run eagerly.
      spdlog::warn("training {} with eager launches: its step could not be captured in a CUDA graph ({})",
                   spec_.name, st.to_string());
      graphs_.clear();
      TROUPE_CUDA_CHECK(cudaStreamSynchronize(stream()));
      return {};
    }
    graphs_.push_back(std::move(g));
  }
  return {};
}

Status CudaJob::start_epoch(const std::vector<int32_t>& perm) {
  // The previous epoch's work has finished (the loop waited for its last chunk), so the pinned
  // buffer is free to overwrite.
  std::memcpy(host_perm_.get(), perm.data(), perm.size() * sizeof(int32_t));
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(perm_.get(), host_perm_.get(), perm.size() * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, stream()));
  TROUPE_RETURN_IF_ERROR(kc::gather_rows(epoch_images_.get(), train_.images.get(), train_.count,
                                         spec_.features, perm_.get(), steps_per_epoch_ * o_.batch_size,
                                         epoch_labels_.get(), train_.labels.get(), stream()));
  TROUPE_CUDA_CHECK(cudaMemsetAsync(step_loss_.get(), 0, step_loss_.bytes(), stream()));
  TROUPE_CUDA_CHECK(cudaMemsetAsync(step_correct_.get(), 0, step_correct_.bytes(), stream()));
  return {};
}

kc::DeviceStep CudaJob::step_at(int64_t offset_in_chunk) const {
  // Step number = steps done before this chunk (device counter) + position in the chunk, 1-based;
  // the rate is looked up in the schedule table by step. f16: the loss scale gates the update.
  kc::DeviceStep at;
  at.steps_done = steps_done_.get();
  at.offset = offset_in_chunk + 1;
  at.lr_table = lr_table_.get();
  at.gate = scaled() ? loss_scale_.get() : nullptr;
  return at;
}

Status CudaJob::optimizer_step(const kc::DeviceStep& at) {
  const size_t n = param_count();
  if (o_.optimizer == "sgd") {
    kc::SgdParams hp;
    hp.lr = o_.effective_lr();
    hp.momentum = o_.momentum;
    hp.weight_decay = o_.weight_decay;
    return kc::sgd_step(params_.get(), grads_.get(), state1_.get(), n, hp, at, stream());
  }
  kc::AdamParams hp;
  hp.lr = o_.effective_lr();
  hp.weight_decay = o_.weight_decay;
  hp.decoupled = o_.optimizer == "adamw";
  return kc::adam_step(params_.get(), grads_.get(), state1_.get(), state2_.get(), n, at, hp, stream());
}

Status CudaJob::enqueue_steps(int64_t first, int64_t count) {
  const int64_t features = spec_.features;
  for (int64_t s = first; s < first + count; ++s) {
    const int64_t row = s * o_.batch_size;
    TROUPE_RETURN_IF_ERROR(model_->forward_backward(params_.get(), epoch_images_.get() + row * features,
                                                   epoch_labels_.get() + row, o_.batch_size, grads_.get(),
                                                   step_loss_.get() + s, step_correct_.get() + s));
    const kc::DeviceStep at = step_at(s - first);
    if (scaled()) {  // as the CPU: the check decides on this step's gradients
      TROUPE_RETURN_IF_ERROR(kc::loss_scale_check(grads_.get(), param_count(), loss_scale_.get(), scale_options_, at,
                                                  stream()));
    }
    TROUPE_RETURN_IF_ERROR(optimizer_step(at));
  }
  TROUPE_RETURN_IF_ERROR(kc::add_to_counter(steps_done_.get(), count, stream()));
  return {};
}

Status CudaJob::enqueue_chunk(int64_t first, int64_t count, cudaEvent_t done) {
  const size_t c = static_cast<size_t>(first / kStepsPerChunk);
  const bool full = first % kStepsPerChunk == 0 && count == std::min(kStepsPerChunk, steps_per_epoch_ - first);
  if (full && c < graphs_.size()) {
    TROUPE_RETURN_IF_ERROR(graphs_[c].launch(stream()));
  } else {
    TROUPE_RETURN_IF_ERROR(enqueue_steps(first, count));  // eager: no graphs, or a chunk cut by max_steps
  }
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(host_loss_.get() + first, step_loss_.get() + first, count * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream()));
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(host_correct_.get() + first, step_correct_.get() + first,
                                    count * sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream()));
  if (scaled()) {
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(host_scale_.get() + c % 2, loss_scale_.get(), sizeof(kc::DeviceLossScale),
                                      cudaMemcpyDeviceToHost, stream()));
  }
  TROUPE_CUDA_CHECK(cudaEventRecord(done, stream()));
  return {};
}

Expected<double> CudaJob::evaluate(const DeviceDataset& data) {
  TROUPE_CUDA_CHECK(cudaMemsetAsync(eval_correct_.get(), 0, sizeof(unsigned long long), stream()));
  const int64_t features = spec_.features;
  for (int64_t begin = 0; begin < data.count; begin += kEvalRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kEvalRows, data.count - begin));
    TROUPE_RETURN_IF_ERROR(model_->evaluate(params_.get(), data.images.get() + begin * features,
                                           data.labels.get() + begin, rows, nullptr, eval_correct_.get()));
  }
  unsigned long long correct = 0;
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(host_correct_.get(), eval_correct_.get(), sizeof(correct),
                                    cudaMemcpyDeviceToHost, stream()));
  kc::Event done;
  TROUPE_RETURN_IF_ERROR(done.create());
  TROUPE_CUDA_CHECK(cudaEventRecord(done.get(), stream()));
  TROUPE_RETURN_IF_ERROR(kc::wait_event(done.get(), kWaitSeconds, "the test-set evaluation"));
  correct = host_correct_[0];
  return data.count ? static_cast<double>(correct) / data.count : 0.0;
}

Expected<bool> CudaJob::params_finite() {
  kc::DeviceBuffer<int32_t> flag;
  TROUPE_RETURN_IF_ERROR(flag.allocate(1, "a flag"));
  TROUPE_RETURN_IF_ERROR(kc::all_finite(params_.get(), param_count(), flag.get(), stream()));
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(host_correct_.get(), flag.get(), sizeof(int32_t), cudaMemcpyDeviceToHost,
                                    stream()));
  kc::Event done;
  TROUPE_RETURN_IF_ERROR(done.create());
  TROUPE_CUDA_CHECK(cudaEventRecord(done.get(), stream()));
  TROUPE_RETURN_IF_ERROR(kc::wait_event(done.get(), kWaitSeconds, "the parameter check"));
  int32_t host = 0;
  std::memcpy(&host, host_correct_.get(), sizeof(host));
  return host == 1;
}

Expected<std::vector<float>> CudaJob::read_params() {
  std::vector<float> out(param_count());
  TROUPE_CUDA_CHECK(
      cudaMemcpyAsync(out.data(), params_.get(), out.size() * sizeof(float), cudaMemcpyDeviceToHost, stream()));
  kc::Event done;
  TROUPE_RETURN_IF_ERROR(done.create());
  TROUPE_CUDA_CHECK(cudaEventRecord(done.get(), stream()));
  TROUPE_RETURN_IF_ERROR(kc::wait_event(done.get(), kWaitSeconds, "reading the trained parameters"));
  return out;
}

void CudaJob::drain() {
  if (!stream_.get()) return;
  kc::Event e;
  if (!e.create().ok() || cudaEventRecord(e.get(), stream()) != cudaSuccess) return;
  Status st = kc::wait_event(e.get(), kWaitSeconds, "outstanding GPU work");
  if (!st.ok()) spdlog::warn("{}", st.to_string());
}


}  // namespace troupe::cuda_detail
