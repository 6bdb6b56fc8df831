// A GPU replica's training state in and out of checkpoints (trainers/cuda/cuda_replica.h): the
// parameters and the optimizer's vectors on the device, in the CPU replicas' checkpoint format.
// Internal to trainers/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/status.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/checkpoint/collective_write.h"
#include "trainers/cuda/cuda_replica.h"
#include "trainers/setup/train_options.h"

namespace troupe::cuda_detail {

// The device buffers of a replica's state: n parameters and up to two optimizer vectors (null when
// the optimizer keeps fewer: gpu_options.h device_optimizer_vectors).
struct DeviceTrainingState {
  size_t n = 0;
  float* params = nullptr;
  float* state1 = nullptr;  // sgd: the velocity; adam: m
  float* state2 = nullptr;  // adam: v
};

// Copies a checkpoint's parameters and optimizer vectors onto the device (queued on `stream`; the
// caller waits). invalid_argument when the checkpoint is another model's or optimizer's, naming
// what differs.
Status restore_state(const checkpoint::TrainingState& from, const TrainOptions& options, const DeviceTrainingState& to,
                     cudaStream_t stream);

// This replica's shard of the checkpoint at `at` (checkpoint::write_replica_checkpoint): its slice
// of the parameters and optimizer vectors copied from the device (waiting at most wait_s), written,
// and committed by rank 0 once every replica's is durable.
// `optimizer_steps`: the steps the optimizer applied (the job's, less f16's skipped ones).
Status write_state(const CudaReplica& replica, const checkpoint::ReplicaPoint& at, int64_t optimizer_steps,
                   const TrainOptions& options, const DeviceTrainingState& state, cudaStream_t stream, double wait_s);

}  // namespace troupe::cuda_detail
