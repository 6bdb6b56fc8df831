// The StepDevice (step_device.h) of the host: the job's Trainer (as set_up_trainer builds it, the
// same one the CPU worker trains) computes a step's gradient when the loop waits for it, as late as
// a real device could, so a loop that reads or writes a buffer too early gets a wrong gradient. It
// also checks the rules of step_device.h and fails with internal_error naming the one broken. What
// tests run the device loop (device_worker.h) with, against the CPU worker (async_worker.h).
#pragma once

#include <memory>
#include <vector>

#include "kernels/cpu/denormals.h"
#include "trainers/ps/step_device.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::ps {

class CpuStepDevice final : public StepDevice {
 public:
  // The trainer options.model for replica `rank` of `world` (set_up_trainer's errors), for batches
  // of up to `max_rows` rows, on options.cpu_threads BLAS threads. Use it on the thread that made it.
  static Expected<std::unique_ptr<CpuStepDevice>> make(const TrainOptions& options, DataSpec data, int rank,
                                                       int world, int64_t max_rows);

  size_t parameters() const override { return n_; }
  std::string name() const override { return "cpu (" + setup_.where + ")"; }
  std::string model() const override { return setup_.model; }
  std::vector<std::pair<size_t, size_t>> state_ranges() const override;
  float* pull_buffer(int slot) override;
  const float* push_buffer() const override { return grads_.data(); }
  Status upload_batch(const Batch& batch) override;
  Status compute(int slot) override;
  Expected<BatchStats> wait_gradient() override;
  Status replay(int slot, const Batch& rows, float* out) override;
  Expected<EvalTotals> evaluate(int slot, const Dataset& data) override;

  int64_t computed() const { return computed_; }  // gradients waited for
  int64_t replayed() const { return replayed_; }

 private:
  CpuStepDevice(TrainerSetup setup, int64_t max_rows);
  Status check_idle(const char* what) const;

  TrainerSetup setup_;
  // As the CPU worker computes (kernels/cpu/denormals.h), on the thread that made the device.
  kernels::cpu::ScopedFlushDenormals flush_denormals_;
  size_t n_;
  int64_t max_rows_;
  int64_t features_ = 0;
  DataSpec spec_;         // the batches' fields are bound from it
  BatchFields fields_;
  std::vector<float> params_[2], grads_;
  struct Rows {  // an uploaded batch: classes or values, `width` per row
    std::vector<float> inputs;
    std::vector<int32_t> labels;
    std::vector<float> targets;
    int64_t size = 0, width = 1;
  };
  Rows batches_[2];
  int64_t uploads_ = 0;
  int last_batch_ = -1;   // the batch slot upload_batch() filled last, -1 once computed
  int flight_slot_ = -1;  // the parameter slot of the computation in flight, -1: none
  int flight_batch_ = -1;
  Status broken_;         // a rule the loop broke, reported by the next wait
  int64_t computed_ = 0, replayed_ = 0;
};

}  // namespace troupe::ps
