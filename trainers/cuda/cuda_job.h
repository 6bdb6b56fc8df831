// CudaJob: one GPU training job's state (data set, parameters, optimizer state, the shuffled epoch,
// per-step loss/correct slots, captured graphs) and the operations the training loop drives.
// Internal to trainers/cuda; single-threaded, all work in order on one stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/blas.h"
#include "kernels/cuda/loss_scale_ops.h"
#include "kernels/cuda/runtime.h"
#include "trainers/cuda/cuda_model.h"
#include "trainers/cuda/model_spec.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/setup/train_options.h"

namespace troupe::cuda_detail {

namespace kc = kernels::cuda;

// Deadline of any single wait for the GPU: a chunk of steps or an evaluation takes milliseconds, so
// two minutes only passes when the GPU is hung or starved by other processes.
constexpr double kWaitSeconds = 120;
// Rows per forward pass when evaluating (bounds the activation buffers).
constexpr int kEvalRows = 2000;
// Steps per chunk: one CUDA graph, one read-back of the step slots (the last chunk of an epoch
// may be shorter).
constexpr int64_t kStepsPerChunk = 64;

struct DeviceDataset {
  int64_t count = 0;
  kc::DeviceBuffer<float> images;
  kc::DeviceBuffer<int32_t> labels;
};

// One training job's state on the GPU and the steps that drive it. Single-threaded; all work goes
// to one stream in order.
class CudaJob {
 public:
  CudaJob(const TrainOptions& o, ModelSpec spec, int64_t steps_per_epoch)
      : o_(o), spec_(std::move(spec)), steps_per_epoch_(steps_per_epoch) {}

  // Streams, cuBLAS, the model, data and parameters on the device; graphs captured when asked (a
  // model whose step cannot be captured trains with eager launches, with a warning).
  Status setup(const Dataset& train, const Dataset& test);
  // Uploads `perm` and gathers this epoch's batches; clears the per-step slots.
  Status start_epoch(const std::vector<int32_t>& perm);
  // Enqueues steps [first, first + count) of the epoch (as a graph when one was captured for them),
  // then the read-back of their loss/correct slots and an event marking the end.
  Status enqueue_chunk(int64_t first, int64_t count, cudaEvent_t done);
  float step_loss(int64_t s) const { return host_loss_[s]; }
  unsigned long long step_correct(int64_t s) const { return host_correct_[s]; }
  // f16 only (else null): the loss scale's state as the chunk holding epoch step `s` left it
  // (read back with that chunk; later state while the next chunk is pending).
  const kc::DeviceLossScale* loss_scale_after(int64_t s) const {
    return scaled() ? host_scale_.get() + (s / kStepsPerChunk) % 2 : nullptr;
  }
  // Test-set accuracy (synchronises).
  Expected<double> evaluate(const DeviceDataset& data);
  // False when a parameter is NaN or infinite (synchronises).
  Expected<bool> params_finite();
  // The parameters as they stand, in the CPU trainer's flat layout (synchronises).
  Expected<std::vector<float>> read_params();
  // Waits (bounded) for all enqueued work; used before returning, also on errors.
  void drain();

  cudaStream_t stream() const { return stream_.get(); }
  const DeviceDataset& test_data() const { return test_; }

 private:
  Status enqueue_steps(int64_t first, int64_t count);
  Status optimizer_step(const kc::DeviceStep& at);
  kc::DeviceStep step_at(int64_t offset_in_chunk) const;
  bool scaled() const { return o_.precision == DType::f16; }  // dynamic loss scaling on the device
  Status capture_graphs();
  size_t param_count() const { return spec_.initial.size(); }

  const TrainOptions& o_;
  const ModelSpec spec_;
  const int64_t steps_per_epoch_;
  kc::Stream stream_;
  kc::CublasHandle blas_;
  std::unique_ptr<CudaModel> model_;
  DeviceDataset train_, test_;
  kc::DeviceBuffer<float> params_, grads_, state1_, state2_;  // state: velocity, or Adam's m and v
  kc::DeviceBuffer<int64_t> steps_done_;  // steps of the job finished before the current chunk
  kc::DeviceBuffer<float> lr_table_;      // the learning rate of every step of the job
  kc::DeviceBuffer<int32_t> perm_, epoch_labels_;
  kc::DeviceBuffer<float> epoch_images_;  // the epoch's batches in visiting order
  kc::DeviceBuffer<float> step_loss_;     // one slot per step of the epoch
  kc::DeviceBuffer<unsigned long long> step_correct_;
  kc::DeviceBuffer<unsigned long long> eval_correct_;
  kc::PinnedBuffer<int32_t> host_perm_;
  kc::PinnedBuffer<float> host_loss_;
  kc::PinnedBuffer<unsigned long long> host_correct_;
  LossScaleOptions scale_options_;              // f16: the rule's options (TrainOptions::loss_scale_options)
  kc::DeviceBuffer<kc::DeviceLossScale> loss_scale_;
  kc::PinnedBuffer<kc::DeviceLossScale> host_scale_;  // two: read back by chunk parity
  std::vector<kc::GraphExec> graphs_;  // graphs_[c]: steps [c * kStepsPerChunk, ...) of an epoch
};


}  // namespace troupe::cuda_detail
