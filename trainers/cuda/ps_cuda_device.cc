#include "trainers/cuda/ps_cuda_device.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cuda/blas.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/runtime.h"
#include "trainers/cuda/cuda_model.h"

namespace troupe::cuda_detail {
namespace {

namespace kc = kernels::cuda;

constexpr int kTestRows = 2000;  // rows per evaluation pass (bounds the activation buffers)

class PsCudaDevice final : public ps::StepDevice {
 public:
  PsCudaDevice(ModelSpec spec, const PsDeviceOptions& o)
      : spec_(std::move(spec)), n_(spec_.initial.size()), features_(spec_.features), o_(o) {}
  ~PsCudaDevice() override { drain(); }

  Status setup();
  size_t parameters() const override { return n_; }
  std::string name() const override { return name_; }
  std::string model() const override { return spec_.name; }
  float* pull_buffer(int slot) override;
  const float* push_buffer() const override { return push_.get(); }
  Status upload_batch(const Batch& batch) override;
  Status compute(int slot) override;
  Expected<BatchStats> wait_gradient() override;
  Status replay(int slot, const Batch& batch, float* out) override;
  // The correct count (the loss is not summed on the device: rows = 0).
  Expected<EvalTotals> evaluate(int slot, const Dataset& data) override;

 private:
  Status check_slot(int slot, const char* what) const;
  Status check_idle(const char* what) const;
  // The parameters of pull slot `slot` on the device, copied on `stream` unless already there.
  Status make_resident(int slot, cudaStream_t stream);
  // Everything queued on the compute stream, waited for (bounded).
  Status finish_compute(const std::string& what);
  void drain();

  ModelSpec spec_;
  std::string name_;  // "cuda:0 (NVIDIA H100 80GB HBM3)", read once in setup()
  size_t n_;
  int64_t features_;
  PsDeviceOptions o_;
  kc::Stream copy_, compute_;
  kc::CublasHandle blas_;  // on compute_
  std::unique_ptr<CudaModel> model_;  // made on blas_ in setup()
  kc::DeviceBuffer<float> params_, grads_, x_[2], replay_x_, replay_grads_, loss_, test_x_;
  kc::DeviceBuffer<int32_t> y_[2], replay_y_, test_y_;
  kc::DeviceBuffer<unsigned long long> correct_;
  kc::PinnedBuffer<float> pull_[2], push_, host_x_[2], replay_host_x_, replay_host_grads_, host_loss_;
  kc::PinnedBuffer<int32_t> host_y_[2], replay_host_y_;
  kc::PinnedBuffer<unsigned long long> host_correct_;
  kc::Event batch_up_[2], params_up_, computed_, grads_down_, compute_done_, copy_done_;
  int64_t uploads_ = 0;
  int last_batch_ = -1;      // the batch slot uploaded last, -1 once computed
  int64_t batch_rows_[2] = {0, 0};
  int resident_ = -1;        // the pull slot whose parameters params_ holds (or is being given)
  int flight_slot_ = -1;     // the pull slot of the computation in flight
  int flight_batch_ = -1;
  Status broken_;            // a rule of step_device.h the loop broke, or a step that timed out
  const void* test_of_ = nullptr;  // the dataset test_x_ holds
};

Status copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
  return {};
}

Status PsCudaDevice::setup() {
  TROUPE_RETURN_IF_ERROR(kc::select_device(o_.device));
  name_ = "cuda:" + std::to_string(o_.device) + " (" + kc::device_name(o_.device) + ")";
  TROUPE_RETURN_IF_ERROR(copy_.create());
  TROUPE_RETURN_IF_ERROR(compute_.create());
  for (kc::Event* e : {&batch_up_[0], &batch_up_[1], &params_up_, &computed_, &grads_down_, &compute_done_, &copy_done_})
    TROUPE_RETURN_IF_ERROR(e->create());
  TROUPE_RETURN_IF_ERROR(blas_.create(compute_.get()));
  auto made = spec_.make(blas_);
  if (!made.ok()) return made.status();
  model_ = std::move(*made);
  const int rows = static_cast<int>(o_.max_rows);
  TROUPE_RETURN_IF_ERROR(model_->reserve(std::max(rows, kTestRows)));
  const size_t batch = static_cast<size_t>(rows) * static_cast<size_t>(features_);
  TROUPE_RETURN_IF_ERROR(params_.allocate(n_, "parameters"));
  TROUPE_RETURN_IF_ERROR(grads_.allocate(n_, "gradients"));
  TROUPE_RETURN_IF_ERROR(replay_grads_.allocate(n_, "replayed gradients"));
  TROUPE_RETURN_IF_ERROR(loss_.allocate(1, "the step's loss"));
  TROUPE_RETURN_IF_ERROR(correct_.allocate(1, "the step's correct count"));
  TROUPE_RETURN_IF_ERROR(replay_x_.allocate(batch, "a replayed batch"));
  TROUPE_RETURN_IF_ERROR(replay_y_.allocate(static_cast<size_t>(rows), "a replayed batch's labels"));
  TROUPE_RETURN_IF_ERROR(push_.allocate(n_, "the gradient to push"));
  TROUPE_RETURN_IF_ERROR(replay_host_x_.allocate(batch, "a replayed batch"));
  TROUPE_RETURN_IF_ERROR(replay_host_y_.allocate(static_cast<size_t>(rows), "a replayed batch's labels"));
  TROUPE_RETURN_IF_ERROR(replay_host_grads_.allocate(n_, "a replayed gradient"));
  TROUPE_RETURN_IF_ERROR(host_loss_.allocate(1, "the step's loss"));
  TROUPE_RETURN_IF_ERROR(host_correct_.allocate(1, "the step's correct count"));
  for (int i = 0; i < 2; ++i) {
    TROUPE_RETURN_IF_ERROR(x_[i].allocate(batch, "a batch"));
    TROUPE_RETURN_IF_ERROR(y_[i].allocate(static_cast<size_t>(rows), "a batch's labels"));
    TROUPE_RETURN_IF_ERROR(pull_[i].allocate(n_, "pulled parameters"));
    TROUPE_RETURN_IF_ERROR(host_x_[i].allocate(batch, "a batch"));
    TROUPE_RETURN_IF_ERROR(host_y_[i].allocate(static_cast<size_t>(rows), "a batch's labels"));
  }
  return finish_compute("setting up on the GPU");  // failures surface here, not in step 1
}

Status PsCudaDevice::check_slot(int slot, const char* what) const {
  if (slot != 0 && slot != 1) return internal_error(std::string(what) + ": parameter slot " + std::to_string(slot) + " (0 or 1)");
  return {};
}

Status PsCudaDevice::check_idle(const char* what) const {
  if (flight_slot_ >= 0) return internal_error(std::string(what) + " while a step is in flight on " + name());
  return broken_;
}

float* PsCudaDevice::pull_buffer(int slot) {
  if (slot != 0 && slot != 1) {
    if (broken_.ok()) broken_ = internal_error("pull_buffer(" + std::to_string(slot) + "): the slots are 0 and 1");
    return pull_[0].get();
  }
  if (slot == flight_slot_ && broken_.ok())
    broken_ = internal_error("parameter slot " + std::to_string(slot) + " handed out for a pull while a step on it "
                             "was in flight on " + name());
  if (resident_ == slot) resident_ = -1;  // the device's copy is about to be stale
  return pull_[slot].get();
}

Status PsCudaDevice::upload_batch(const Batch& batch) {
  if (batch.size < 1 || batch.size > o_.max_rows || batch.features != features_)
    return invalid_argument("a batch of " + std::to_string(batch.size) + " rows of " + std::to_string(batch.features) +
                            " features; " + name() + " takes up to " + std::to_string(o_.max_rows) + " of " +
                            std::to_string(features_));
  int b = static_cast<int>(uploads_++ % 2);
  if (b == flight_batch_) b = 1 - b;  // never the batch a step in flight reads
  // The pinned slot's previous upload must be done before the host writes it (it was: a step
  // waited for since; the wait is then immediate).
  TROUPE_RETURN_IF_ERROR(kc::wait_event(batch_up_[b].get(), o_.wait_seconds, "a batch's upload on " + name()));
  const size_t xs = static_cast<size_t>(batch.size * features_) * sizeof(float);
  const size_t ys = static_cast<size_t>(batch.size) * sizeof(int32_t);
  std::memcpy(host_x_[b].get(), batch.inputs, xs);
  std::memcpy(host_y_[b].get(), batch.labels, ys);
  cudaStream_t s = copy_.get();
  TROUPE_CUDA_CHECK(cudaStreamWaitEvent(s, computed_.get(), 0));  // no step still reads x_[b]
  TROUPE_RETURN_IF_ERROR(copy(x_[b].get(), host_x_[b].get(), xs, cudaMemcpyHostToDevice, s));
  TROUPE_RETURN_IF_ERROR(copy(y_[b].get(), host_y_[b].get(), ys, cudaMemcpyHostToDevice, s));
  TROUPE_CUDA_CHECK(cudaEventRecord(batch_up_[b].get(), s));
  batch_rows_[b] = batch.size;
  last_batch_ = b;
  return {};
}

Status PsCudaDevice::make_resident(int slot, cudaStream_t stream) {
  if (resident_ == slot) return {};
  TROUPE_RETURN_IF_ERROR(copy(params_.get(), pull_[slot].get(), n_ * sizeof(float), cudaMemcpyHostToDevice, stream));
  resident_ = slot;
  return {};
}

Status PsCudaDevice::compute(int slot) {
  TROUPE_RETURN_IF_ERROR(check_slot(slot, "compute"));
  if (flight_slot_ >= 0) return internal_error("compute() called again before wait_gradient() on " + name());
  if (last_batch_ < 0) return internal_error("compute() before upload_batch() on " + name());
  TROUPE_RETURN_IF_ERROR(broken_);
  const int b = last_batch_;
  cudaStream_t cs = copy_.get(), ks = compute_.get();
  // Copy stream: the parameters, once no computation reads the old ones.
  TROUPE_CUDA_CHECK(cudaStreamWaitEvent(cs, computed_.get(), 0));
  TROUPE_RETURN_IF_ERROR(make_resident(slot, cs));
  TROUPE_CUDA_CHECK(cudaEventRecord(params_up_.get(), cs));
  // Compute stream: forward/backward once the parameters and the batch are there.
  TROUPE_CUDA_CHECK(cudaStreamWaitEvent(ks, params_up_.get(), 0));
  TROUPE_CUDA_CHECK(cudaStreamWaitEvent(ks, batch_up_[b].get(), 0));
  TROUPE_CUDA_CHECK(cudaMemsetAsync(loss_.get(), 0, sizeof(float), ks));
  TROUPE_CUDA_CHECK(cudaMemsetAsync(correct_.get(), 0, sizeof(unsigned long long), ks));
  TROUPE_RETURN_IF_ERROR(model_->forward_backward(params_.get(), x_[b].get(), y_[b].get(),
                                                 static_cast<int>(batch_rows_[b]), grads_.get(), loss_.get(),
                                                 correct_.get()));
  TROUPE_CUDA_CHECK(cudaEventRecord(computed_.get(), ks));
  // Copy stream: the gradient and the batch's loss and count down, once computed.
  TROUPE_CUDA_CHECK(cudaStreamWaitEvent(cs, computed_.get(), 0));
  TROUPE_RETURN_IF_ERROR(copy(push_.get(), grads_.get(), n_ * sizeof(float), cudaMemcpyDeviceToHost, cs));
  TROUPE_RETURN_IF_ERROR(copy(host_loss_.get(), loss_.get(), sizeof(float), cudaMemcpyDeviceToHost, cs));
  TROUPE_RETURN_IF_ERROR(copy(host_correct_.get(), correct_.get(), sizeof(unsigned long long), cudaMemcpyDeviceToHost, cs));
  TROUPE_CUDA_CHECK(cudaEventRecord(grads_down_.get(), cs));
  flight_slot_ = slot;
  flight_batch_ = b;
  last_batch_ = -1;
  return {};
}

Expected<BatchStats> PsCudaDevice::wait_gradient() {
  if (flight_slot_ < 0) return internal_error("wait_gradient() without a step in flight on " + name());
  flight_slot_ = flight_batch_ = -1;
  TROUPE_RETURN_IF_ERROR(broken_);
  Status waited = kc::wait_event(grads_down_.get(), o_.wait_seconds, "the step's gradient on " + name());
  if (!waited.ok()) {  // the step may still run: every later call fails at once instead of queueing behind it
    broken_ = waited;
    return waited;
  }
  BatchStats stats;
  stats.loss = host_loss_[0];
  stats.correct = static_cast<int64_t>(host_correct_[0]);
  return stats;
}

Status PsCudaDevice::finish_compute(const std::string& what) {
  TROUPE_CUDA_CHECK(cudaEventRecord(compute_done_.get(), compute_.get()));
  return kc::wait_event(compute_done_.get(), o_.wait_seconds, what);
}

Status PsCudaDevice::replay(int slot, const Batch& batch, float* out) {
  // One class per example (model_spec.h refuses other data for the GPU).
  const float* inputs = batch.inputs;
  const int32_t* labels = batch.labels;
  const int64_t rows = batch.size;
  if (!labels || batch.target_width != 1)
    return invalid_argument(name() + ": a replay of values or of several classes per example; GPU workers train "
                            "one class per example");
  TROUPE_RETURN_IF_ERROR(check_idle("replay()"));
  TROUPE_RETURN_IF_ERROR(check_slot(slot, "replay"));
  if (rows < 1 || rows > o_.max_rows)
    return invalid_argument("a replay of " + std::to_string(rows) + " rows; " + name() + " takes up to " +
                            std::to_string(o_.max_rows));
  const size_t xs = static_cast<size_t>(rows * features_) * sizeof(float);
  const size_t ys = static_cast<size_t>(rows) * sizeof(int32_t);
  std::memcpy(replay_host_x_.get(), inputs, xs);  // the last replay's copies finished: it was waited for
  std::memcpy(replay_host_y_.get(), labels, ys);
  cudaStream_t ks = compute_.get();
  // The parameters may be going up on the copy stream (a step's) : after it, on this stream.
  TROUPE_CUDA_CHECK(cudaStreamWaitEvent(ks, params_up_.get(), 0));
  TROUPE_RETURN_IF_ERROR(make_resident(slot, ks));
  TROUPE_RETURN_IF_ERROR(copy(replay_x_.get(), replay_host_x_.get(), xs, cudaMemcpyHostToDevice, ks));
  TROUPE_RETURN_IF_ERROR(copy(replay_y_.get(), replay_host_y_.get(), ys, cudaMemcpyHostToDevice, ks));
  TROUPE_RETURN_IF_ERROR(model_->forward_backward(params_.get(), replay_x_.get(), replay_y_.get(),
                                                 static_cast<int>(rows), replay_grads_.get(), nullptr, nullptr));
  TROUPE_CUDA_CHECK(cudaEventRecord(computed_.get(), ks));  // the copy stream's next writes wait for it
  TROUPE_RETURN_IF_ERROR(copy(replay_host_grads_.get(), replay_grads_.get(), n_ * sizeof(float),
                              cudaMemcpyDeviceToHost, ks));
  TROUPE_RETURN_IF_ERROR(finish_compute("a replayed gradient on " + name()));
  std::memcpy(out, replay_host_grads_.get(), n_ * sizeof(float));
  return {};
}

Expected<EvalTotals> PsCudaDevice::evaluate(int slot, const Dataset& data) {
  TROUPE_RETURN_IF_ERROR(check_idle("evaluate()"));
  TROUPE_RETURN_IF_ERROR(check_slot(slot, "evaluate"));
  if (data.features() != features_)
    return invalid_argument("evaluating " + std::to_string(data.features()) + " features on a model of " +
                            std::to_string(features_));
  cudaStream_t ks = compute_.get();
  if (test_of_ != data.images.data() || test_x_.size() != data.images.size()) {  // uploaded once
    TROUPE_RETURN_IF_ERROR(test_x_.allocate(data.images.size(), "the test set"));
    TROUPE_RETURN_IF_ERROR(test_y_.allocate(data.labels.size(), "the test set's labels"));
    // Pageable memory: the copies return once the data is staged (the vectors outlive them anyway).
    TROUPE_RETURN_IF_ERROR(copy(test_x_.get(), data.images.data(), test_x_.bytes(), cudaMemcpyHostToDevice, ks));
    TROUPE_RETURN_IF_ERROR(copy(test_y_.get(), data.labels.data(), test_y_.bytes(), cudaMemcpyHostToDevice, ks));
    test_of_ = data.images.data();
  }
  TROUPE_CUDA_CHECK(cudaStreamWaitEvent(ks, params_up_.get(), 0));
  TROUPE_RETURN_IF_ERROR(make_resident(slot, ks));
  TROUPE_CUDA_CHECK(cudaMemsetAsync(correct_.get(), 0, sizeof(unsigned long long), ks));
  for (int64_t begin = 0; begin < data.count; begin += kTestRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kTestRows, data.count - begin));
    TROUPE_RETURN_IF_ERROR(model_->evaluate(params_.get(), test_x_.get() + begin * features_, test_y_.get() + begin,
                                           rows, nullptr, correct_.get()));
  }
  TROUPE_CUDA_CHECK(cudaEventRecord(computed_.get(), ks));
  TROUPE_RETURN_IF_ERROR(copy(host_correct_.get(), correct_.get(), sizeof(unsigned long long),
                              cudaMemcpyDeviceToHost, ks));
  TROUPE_RETURN_IF_ERROR(finish_compute("the test-set evaluation on " + name()));
  EvalTotals t;
  t.correct = static_cast<int64_t>(host_correct_[0]);
  return t;
}

// On every way out, queued work finishes before the buffers it uses are freed.
void PsCudaDevice::drain() {
  if (compute_.get() && compute_done_.get()) (void)finish_compute("outstanding GPU work");
  if (copy_.get() && copy_done_.get() && cudaEventRecord(copy_done_.get(), copy_.get()) == cudaSuccess)
    (void)kc::wait_event(copy_done_.get(), 120, "outstanding copies");
}

}  // namespace

Expected<std::unique_ptr<ps::StepDevice>> make_ps_cuda_device(ModelSpec spec, const PsDeviceOptions& options) {
  if (options.max_rows < 1 || spec.features < 1 || !spec.make)
    return invalid_argument("a GPU step device for batches of " + std::to_string(options.max_rows) + " rows of " +
                            std::to_string(spec.features) + " features");
  auto d = std::make_unique<PsCudaDevice>(std::move(spec), options);
  TROUPE_RETURN_IF_ERROR(d->setup());
  return std::unique_ptr<ps::StepDevice>(std::move(d));
}

}  // namespace troupe::cuda_detail
