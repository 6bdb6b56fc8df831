// train_replica_cuda in a build without CUDA (the real one is trainers/cuda/cuda_replica.cc).
#include "trainers/cuda_replica.h"

#ifndef TROUPE_WITH_CUDA
namespace troupe {

Expected<TrainResult> train_replica_cuda(const TrainOptions&, const Dataset&, const Dataset&, const CudaReplica&,
                                         const ProgressFn&, std::vector<float>*) {
  return unavailable("GPU workers: this troupe was built without CUDA (nvcc was not found when it was "
                     "configured); train on CPU workers (drop --gpus-per-worker) or rebuild where "
                     "/usr/local/cuda/bin/nvcc exists");
}

}  // namespace troupe
#endif
