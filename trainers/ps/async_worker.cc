#include "trainers/ps/async_worker.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "kernels/cpu/blas_info.h"
#include "kernels/cpu/denormals.h"
#include "kernels/cpu/ops.h"
#include "trainers/sync/micro_batches.h"
#include "trainers/setup/model_file.h"
#include "trainers/ps/worker_common.h"
#include "trainers/ps/worker_loop.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::ps {
namespace {

// The CPU worker's StepDevice: its Trainer computes a step's gradient on the host when the loop
// waits for it, straight from the feed's batch (valid until the feed's next call) and the pulled
// parameters, with nothing copied; with --accumulate K as K micro-batches (micro_batches.h), and a
// replay recomputes a push the same way.
class TrainerDevice final : public StepDevice {
 public:
  TrainerDevice(const TrainerSetup& setup, DataSpec spec, int accumulate)
      : setup_(setup), n_(setup.space.size()), features_(spec.features), parts_(accumulate), spec_(std::move(spec)),
        grad_view_(grads_.data(), n_) {}

  size_t parameters() const override { return n_; }
  std::string name() const override { return "cpu"; }
  std::string model() const override { return setup_.model; }
  float* pull_buffer(int slot) override { return pulled_[slot].data(); }
  const float* push_buffer() const override { return grads_.data(); }
  Status upload_batch(const Batch& batch) override {
    batch_ = batch;
    return {};
  }
  Status compute(int slot) override {
    slot_ = slot;
    return {};
  }
  Expected<BatchStats> wait_gradient() override {
    std::fill(grads_.begin(), grads_.end(), 0.0f);  // the API promises zeroed gradients
    return forward_backward_parts(*setup_.trainer, batch_, params(slot_), grad_view_, parts_, scratch_);
  }
  Status replay(int slot, const Batch& rows, float* out) override {
    std::fill(out, out + n_, 0.0f);  // the API promises zeroed gradients
    Gradients g(out, n_);
    Batch b = rows;
    replay_fields_.bind(spec_, &b);
    return forward_backward_parts(*setup_.trainer, b, params(slot), g, parts_, scratch_).status();
  }
  Expected<EvalTotals> evaluate(int slot, const Dataset& data) override {
    return evaluate_rows(*setup_.trainer, params(slot), data, 0, data.count);
  }

 private:
  Parameters params(int slot) const { return Parameters(pulled_[slot].data(), n_); }

  const TrainerSetup& setup_;
  const size_t n_;
  const int64_t features_;
  const int parts_;             // --accumulate
  const DataSpec spec_;
  BatchFields replay_fields_;
  // Two parameter buffers: a pull fills one while the other keeps the last whole pull, on which a
  // replay is computed should a shard fail in the middle of the pull (ps_client.h).
  std::vector<float> pulled_[2] = {std::vector<float>(n_), std::vector<float>(n_)};
  std::vector<float> grads_ = std::vector<float>(n_);
  std::vector<float> scratch_;  // a micro-batch's gradients
  Gradients grad_view_;
  Batch batch_;
  int slot_ = 0;
};

}  // namespace

Expected<TrainResult> train_ps_worker(const TrainOptions& o, const Dataset& train, const Dataset& test,
                                      BatchFeed& feed, const PsWorker& w, const ProgressFn& progress,
                                      PsWorkerReport* report, std::vector<float>* final_params) {
  TROUPE_RETURN_IF_ERROR(check_worker_options(o, train, w));
  PsClient& client = *w.client;
  auto setup = set_up_trainer(o, train.spec(), w.rank, w.workers);
  if (!setup.ok()) return finish_on_error(client, setup.status());
  const std::string& where = setup->where;
  const size_t n = setup->space.size();
  if (client.parameters() != n)
    return finish_on_error(client, invalid_argument("the parameter servers hold " +
                                                    std::to_string(client.parameters()) + " parameters but " + where +
                                                    " declares " + std::to_string(n) +
                                                    ": were they started with the job's options?"));
  kernels::cpu::set_blas_threads(o.cpu_threads);
  kernels::cpu::ScopedFlushDenormals flush_denormals;  // see kernels/cpu/denormals.h

  // --save: rank 0 writes the parameters it evaluated last, once every worker finished.
  const bool saves = w.rank == 0 && !o.save_path.empty();
  if (saves) TROUPE_RETURN_IF_ERROR(finish_on_error(client, check_save_target(o.save_path)));
  std::vector<float> saved;
  if (saves && !final_params) final_params = &saved;

  TrainerDevice device(*setup, train.spec(), o.accumulate);
  const ScopedTransform augment(feed, *setup->trainer, o.seed);  // augmentation (replays too: rows_of)
  PsWorkerReport measured;
  auto result = run_worker_loop(device, where, o, train, test, feed, w, progress, &measured, final_params);
  if (!result.ok()) return result;
  if (saves) {
    TROUPE_RETURN_IF_ERROR(save_trained_model(o, train, setup->space, setup->model, final_params->data(), *result));
    spdlog::info("model written to {}", o.save_path);
  }
  if (report) *report = measured;
  spdlog::info("worker {} done: {} steps, pull {:.0f} ms, compute {:.0f} ms, push {:.0f} ms; staleness {}", w.rank,
               result->steps, measured.pull_ms, measured.compute_ms, measured.push_ms, measured.staleness.describe());
  return result;
}

}  // namespace troupe::ps
