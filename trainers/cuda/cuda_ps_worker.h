// A worker of an async parameter-server job on a GPU (a job worker started with `--strategy async
// --gpus-per-worker`): the loop of trainers/ps/device_worker.h (the CPU worker's clocks, staleness
// waits, data tags, accounting and replays) with the built-in MLP's forward and backward on the
// worker's own device (the node manager's assignment, actors/gpu_assignment.h). Pulled parameters
// land in pinned host memory and go up on a copy stream, the gradient comes down on it, and the
// compute stream waits for them through events (trainers/cuda/ps_cuda_device.h).
//
// Declared in every build; built without CUDA it returns `unavailable` saying so.
#pragma once

#include <chrono>
#include <vector>

#include "data/feed/batch_feed.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/ps/async_worker.h"
#include "trainers/setup/train_options.h"

namespace troupe {

struct CudaPsWorker {
  int device = 0;                            // this worker's GPU
  std::chrono::milliseconds timeout{60000};  // per wait for the GPU
};

// Trains worker `worker.rank` of an async job as ps::train_ps_worker does (its contract, report
// and errors), on `gpu.device`. Errors besides: invalid_argument (options the GPU path does not
// take: check_gpu_worker_options's), unavailable (no such device, built without CUDA), timeout (the GPU did
// not finish a step in time). On every error the shards are told this worker finished.
Expected<TrainResult> train_ps_worker_cuda(const TrainOptions& options, const Dataset& train, const Dataset& test,
                                           BatchFeed& feed, const ps::PsWorker& worker, const CudaPsWorker& gpu,
                                           const ProgressFn& progress = {}, ps::PsWorkerReport* report = nullptr,
                                           std::vector<float>* final_params = nullptr);

}  // namespace troupe
