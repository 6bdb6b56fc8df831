#include "trainers/ps/device_worker.h"

#include <spdlog/spdlog.h>

#include "trainers/ps/worker_common.h"
#include "trainers/ps/worker_loop.h"

namespace troupe::ps {
namespace {

Status check_device_worker(const TrainOptions& o, const PsWorker& w, const StepDevice& device) {
  if (o.accumulate != 1)
    return invalid_argument("--accumulate " + std::to_string(o.accumulate) + ": a device worker computes one batch "
                            "per step; accumulation is for CPU workers");
  if (w.client->mode() != PsMode::async)
    return invalid_argument("a device worker trains async jobs only (the shards are in " +
                            std::string(mode_name(w.client->mode())) + " mode); train central jobs on CPU workers");
  if (w.start_step != 0 || w.whole_global_batches)
    return invalid_argument("PsWorker::start_step and whole_global_batches are for central jobs, which a device "
                            "worker does not train");
  if (w.client->parameters() != device.parameters())
    return invalid_argument("the parameter servers hold " + std::to_string(w.client->parameters()) +
                            " parameters but the model on " + device.name() + " has " +
                            std::to_string(device.parameters()) + ": were they started with the job's options?");
  return {};
}

}  // namespace

Expected<TrainResult> train_ps_worker_on(StepDevice& device, const TrainOptions& o, const Dataset& train,
                                         const Dataset& test, BatchFeed& feed, const PsWorker& w,
                                         const ProgressFn& progress, PsWorkerReport* report,
                                         std::vector<float>* final_params) {
  TROUPE_RETURN_IF_ERROR(check_worker_options(o, train, w));
  TROUPE_RETURN_IF_ERROR(finish_on_error(*w.client, check_device_worker(o, w, device)));
  const std::string where = "worker " + std::to_string(w.rank) + " on " + device.name();
  PsWorkerReport measured;
  auto result = run_worker_loop(device, where, o, train, test, feed, w, progress, &measured, final_params);
  if (!result.ok()) return result;
  if (report) *report = measured;
  spdlog::info("worker {} done on {}: {} steps, pull {:.0f} ms, device {:.0f} ms, push {:.0f} ms; staleness {}",
               w.rank, result->device, result->steps, measured.pull_ms, measured.compute_ms, measured.push_ms,
               measured.staleness.describe());
  return result;
}

}  // namespace troupe::ps
