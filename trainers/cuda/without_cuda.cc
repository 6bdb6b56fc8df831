// The GPU replica and the async GPU worker in a build without CUDA: each says so and what to do
// (the real ones are cuda_replica.cc and cuda_ps_worker.cc beside this file, built with CUDA only).
#include "trainers/cuda/cuda_ps_worker.h"
#include "trainers/cuda/cuda_replica.h"

#ifndef TROUPE_WITH_CUDA
namespace troupe {

Expected<TrainResult> train_replica_cuda(const TrainOptions&, const Dataset&, const Dataset&, const CudaReplica&,
                                         const ProgressFn&, std::vector<float>*) {
  return unavailable("GPU workers: this troupe was built without CUDA (nvcc was not found when it was "
                     "configured); train on CPU workers (drop --gpus-per-worker) or rebuild where "
                     "/usr/local/cuda/bin/nvcc exists");
}

Expected<TrainResult> train_ps_worker_cuda(const TrainOptions&, const Dataset&, const Dataset&, BatchFeed&,
                                           const ps::PsWorker& worker, const CudaPsWorker&, const ProgressFn&,
                                           ps::PsWorkerReport*, std::vector<float>*) {
  if (worker.client) (void)worker.client->finish();  // nobody waits for a worker that cannot start
  return unavailable("async GPU workers: this troupe was built without CUDA (nvcc was not found when it was "
                     "configured); train on CPU workers (drop --gpus-per-worker) or rebuild where "
                     "/usr/local/cuda/bin/nvcc exists");
}

}  // namespace troupe
#endif
