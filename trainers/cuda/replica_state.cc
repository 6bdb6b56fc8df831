#include "trainers/cuda/replica_state.h"

#include <string>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/runtime.h"
#include "trainers/checkpoint/collective_write.h"
#include "trainers/setup/gpu_options.h"

namespace troupe::cuda_detail {

namespace kc = kernels::cuda;

namespace {

std::vector<float*> vectors_of(const TrainOptions& o, const DeviceTrainingState& s) {
  std::vector<float*> v{s.state1, s.state2};
  v.resize(static_cast<size_t>(device_optimizer_vectors(o)));
  return v;
}

}  // namespace

Status restore_state(const checkpoint::TrainingState& from, const TrainOptions& o, const DeviceTrainingState& to,
                     cudaStream_t stream) {
  if (from.params.size() != to.n) {
    return invalid_argument("the checkpoint holds " + std::to_string(from.params.size()) + " parameters; the model " +
                            "has " + std::to_string(to.n) + " (another model or trainer settings?)");
  }
  TROUPE_RETURN_IF_ERROR(check_device_optimizer_state(o, from.optimizer, to.n));
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(to.params, from.params.data(), to.n * sizeof(float), cudaMemcpyHostToDevice,
                                    stream));
  const std::vector<float*> dst = vectors_of(o, to);
  for (size_t i = 0; i < dst.size(); ++i) {
    if (!dst[i]) return internal_error("restore_state: optimizer vector " + std::to_string(i) + " has no buffer");
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst[i], from.optimizer.vectors[i].data(), to.n * sizeof(float),
                                      cudaMemcpyHostToDevice, stream));
  }
  // The copies read pageable host memory; finish them before `from` can go away.
  kc::Event done;
  TROUPE_RETURN_IF_ERROR(done.create());
  TROUPE_CUDA_CHECK(cudaEventRecord(done.get(), stream));
  return kc::wait_event(done.get(), 120, "copying the checkpoint onto the GPU");
}

Status write_state(const CudaReplica& replica, const checkpoint::ReplicaPoint& at, int64_t optimizer_steps,
                   const TrainOptions& o, const DeviceTrainingState& state, cudaStream_t stream, double wait_s) {
  auto fill = [&](size_t begin, size_t end, checkpoint::ShardData* d) -> Status {
    const size_t len = end - begin;
    d->params.resize(len);
    d->optimizer.name = o.optimizer;
    d->optimizer.steps = optimizer_steps;  // as the CPU optimizers count: applied steps
    const std::vector<float*> src = vectors_of(o, state);
    d->optimizer.vectors.assign(src.size(), std::vector<float>(len));
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(d->params.data(), state.params + begin, len * sizeof(float),
                                      cudaMemcpyDeviceToHost, stream));
    for (size_t i = 0; i < src.size(); ++i) {
      TROUPE_CUDA_CHECK(cudaMemcpyAsync(d->optimizer.vectors[i].data(), src[i] + begin, len * sizeof(float),
                                        cudaMemcpyDeviceToHost, stream));
    }
    kc::Event done;
    TROUPE_RETURN_IF_ERROR(done.create());
    TROUPE_CUDA_CHECK(cudaEventRecord(done.get(), stream));
    return kc::wait_event(done.get(), wait_s, "copying the state off the GPU");
  };
  return checkpoint::write_replica_checkpoint(at, state.n, fill, replica.checkpoints.dir, replica.host,
                                              replica.timeout, replica.checkpoints.commit);
}

}  // namespace troupe::cuda_detail
