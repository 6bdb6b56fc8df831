#include "trainers/ps/cpu_step_device.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/ops.h"
#include "trainers/optim/optimizer.h"

namespace troupe::ps {

Expected<std::unique_ptr<CpuStepDevice>> CpuStepDevice::make(const TrainOptions& options, DataSpec data, int rank,
                                                            int world, int64_t max_rows) {
  if (max_rows < 1) return invalid_argument("CpuStepDevice: batches of " + std::to_string(max_rows) + " rows");
  auto setup = set_up_trainer(options, data, rank, world);
  if (!setup.ok()) return setup.status();
  kernels::cpu::set_blas_threads(options.cpu_threads);
  std::unique_ptr<CpuStepDevice> d(new CpuStepDevice(std::move(*setup), max_rows));
  d->features_ = data.features;
  d->spec_ = std::move(data);
  return d;
}

CpuStepDevice::CpuStepDevice(TrainerSetup setup, int64_t max_rows)
    : setup_(std::move(setup)), n_(setup_.space.size()), max_rows_(max_rows) {
  params_[0].resize(n_);
  params_[1].resize(n_);
  grads_.resize(n_);
}

float* CpuStepDevice::pull_buffer(int slot) {
  if (slot != 0 && slot != 1) {
    broken_ = internal_error("pull_buffer(" + std::to_string(slot) + "): the slots are 0 and 1");
    return params_[0].data();
  }
  if (slot == flight_slot_ && broken_.ok())
    broken_ = internal_error("parameter slot " + std::to_string(slot) + " handed out for a pull while a computation "
                             "on it was in flight");
  return params_[slot].data();
}

std::vector<std::pair<size_t, size_t>> CpuStepDevice::state_ranges() const {
  return troupe::state_ranges(setup_.space);
}

Status CpuStepDevice::upload_batch(const Batch& batch) {
  if (batch.size < 1 || batch.size > max_rows_ || batch.features != features_)
    return invalid_argument("upload_batch: " + std::to_string(batch.size) + " rows of " +
                            std::to_string(batch.features) + " features; the device takes up to " +
                            std::to_string(max_rows_) + " of " + std::to_string(features_));
  // Never the slot a computation in flight reads: the other one.
  int slot = static_cast<int>(uploads_++ % 2);
  if (slot == flight_batch_) slot = 1 - slot;
  Rows& r = batches_[slot];
  const int64_t ys = batch.size * batch.target_width;
  r.inputs.assign(batch.inputs, batch.inputs + batch.size * batch.features);
  if (batch.labels) r.labels.assign(batch.labels, batch.labels + ys);
  else r.labels.clear();
  if (batch.targets) r.targets.assign(batch.targets, batch.targets + ys);
  else r.targets.clear();
  r.size = batch.size;
  r.width = batch.target_width;
  last_batch_ = slot;
  return {};
}

Status CpuStepDevice::compute(int slot) {
  if (slot != 0 && slot != 1) return internal_error("compute(" + std::to_string(slot) + "): the slots are 0 and 1");
  if (flight_slot_ >= 0) return internal_error("compute() called again before wait_gradient()");
  if (last_batch_ < 0) return internal_error("compute() before any upload_batch()");
  flight_slot_ = slot;
  flight_batch_ = last_batch_;
  last_batch_ = -1;  // each batch is computed once
  return {};
}

Expected<BatchStats> CpuStepDevice::wait_gradient() {
  if (flight_slot_ < 0) return internal_error("wait_gradient() without a compute() in flight");
  const int slot = flight_slot_, b = flight_batch_;
  flight_slot_ = flight_batch_ = -1;
  if (!broken_.ok()) return broken_;
  const Rows& r = batches_[b];
  Batch batch{r.inputs.data(), r.labels.empty() ? nullptr : r.labels.data(), r.size, features_};
  batch.targets = r.targets.empty() ? nullptr : r.targets.data();
  batch.target_width = r.width;
  fields_.bind(spec_, &batch);
  std::fill(grads_.begin(), grads_.end(), 0.0f);  // the API promises zeroed gradients
  Gradients g(grads_.data(), n_);
  auto stats = setup_.trainer->forward_backward(batch, Parameters(params_[slot].data(), n_), g);
  if (!stats.ok()) return stats.status().with_context(setup_.where + ": forward_backward");
  ++computed_;
  return *stats;
}

Status CpuStepDevice::check_idle(const char* what) const {
  if (flight_slot_ >= 0) return internal_error(std::string(what) + " while a computation is in flight");
  return broken_;
}

Status CpuStepDevice::replay(int slot, const Batch& rows_batch, float* out) {
  const int64_t rows = rows_batch.size;
  TROUPE_RETURN_IF_ERROR(check_idle("replay()"));
  if (slot != 0 && slot != 1) return internal_error("replay(" + std::to_string(slot) + "): the slots are 0 and 1");
  if (rows < 1 || rows > max_rows_)  // as a GPU device, whose replay buffers hold max_rows
    return invalid_argument("a replay of " + std::to_string(rows) + " rows; " + name() + " takes up to " +
                            std::to_string(max_rows_));
  Batch batch = rows_batch;
  fields_.bind(spec_, &batch);
  std::fill(out, out + n_, 0.0f);
  Gradients g(out, n_);
  TROUPE_RETURN_IF_ERROR(
      setup_.trainer->forward_backward(batch, Parameters(params_[slot].data(), n_), g).status().with_context(
          setup_.where + ": replay"));
  ++replayed_;
  return {};
}

Expected<EvalTotals> CpuStepDevice::evaluate(int slot, const Dataset& data) {
  TROUPE_RETURN_IF_ERROR(check_idle("evaluate()"));
  if (slot != 0 && slot != 1) return internal_error("evaluate(" + std::to_string(slot) + "): the slots are 0 and 1");
  return evaluate_rows(*setup_.trainer, Parameters(params_[slot].data(), n_), data, 0, data.count);
}

}  // namespace troupe::ps
