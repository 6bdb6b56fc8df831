#include "trainers/cuda/cuda_ps_worker.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "trainers/cuda/ps_cuda_device.h"
#include "trainers/cuda/model_spec.h"
#include "trainers/setup/gpu_options.h"
#include "trainers/setup/model_file.h"
#include "trainers/ps/device_worker.h"

namespace troupe {

Expected<TrainResult> train_ps_worker_cuda(const TrainOptions& o, const Dataset& train, const Dataset& test,
                                           BatchFeed& feed, const ps::PsWorker& worker, const CudaPsWorker& gpu,
                                           const ProgressFn& progress, ps::PsWorkerReport* report,
                                           std::vector<float>* final_params) {
  // The shards hear that this worker is done when it cannot even start, so nobody waits for it.
  auto fail = [&](Status st) {
    if (worker.client) (void)worker.client->finish();
    return st;
  };
  Status usable = o.precision == DType::f16
                      ? invalid_argument("async GPU workers do not scale the loss (f16) yet, as async CPU workers "
                                         "do not: --precision bf16, not f16")
                      : check_gpu_worker_options(o);
  if (!usable.ok()) return fail(usable);
  TrainOptions pulled = o;  // the parameters come from the servers (they took --init-from)
  pulled.init_from.clear();
  auto spec = cuda_model_spec(pulled, train.spec());
  if (!spec.ok()) return fail(spec.status());
  if (worker.workers < 1 || o.batch_size % worker.workers != 0 || o.batch_size < worker.workers)
    return fail(invalid_argument("--batch-size " + std::to_string(o.batch_size) + " (the global batch) does not divide "
                                 "among " + std::to_string(worker.workers) + " workers"));
  cuda_detail::PsDeviceOptions d;
  d.device = gpu.device;
  d.max_rows = o.batch_size / worker.workers;
  d.wait_seconds = std::max(1.0, gpu.timeout.count() / 1000.0);
  auto device = cuda_detail::make_ps_cuda_device(std::move(*spec), d);
  if (!device.ok())
    return fail(device.status().with_context("setting up worker " + std::to_string(worker.rank) + " on GPU " +
                                             std::to_string(gpu.device)));
  // --save: rank 0 writes the parameters it evaluated last, as the CPU workers do.
  const bool saves = worker.rank == 0 && !o.save_path.empty();
  if (saves) {
    Status target = check_save_target(o.save_path);
    if (!target.ok()) return fail(target);
  }
  std::vector<float> saved;
  if (saves && !final_params) final_params = &saved;
  auto result = ps::train_ps_worker_on(**device, o, train, test, feed, worker, progress, report, final_params);
  if (result.ok() && saves) {
    TROUPE_RETURN_IF_ERROR(save_trained_model(o, train, *final_params, *result));
    spdlog::info("model written to {}", o.save_path);
  }
  return result;
}

}  // namespace troupe
