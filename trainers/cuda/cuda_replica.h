// One replica of a synchronous data-parallel job on a GPU (a job worker started with
// `--gpus-per-worker`): the model's (the built-in mlp or cnn: trainers/cuda/model_spec.h)
// parameters, gradients and optimizer state live on the worker's own device (the node manager's assignment, actors/gpu_assignment.h); each step this replica's
// rows of the global batch come from the job's feed (the shard ledger) through pinned memory, the
// gradients are all-reduced on the device — NCCL when every worker has a GPU of its own, else the
// staged path through the job's host group (collectives/device_communicator.h) — together with the
// loss and correct count, and the optimizer runs on the device. Every replica then holds the same
// parameters, as on the CPU path (train_replica, trainers/sync/trainer_driver.h), to rounding.
//
// Checkpoints as the CPU replicas write them (trainers/sync/trainer_driver.h Replica::checkpoints,
// the same files: parameters and optimizer state in the CPU optimizers' format), copied from the
// device; a restarted or resumed job starts from one. Limits, refused by the job spec before
// anything runs: the built-in mlp and cnn, f32, or bf16 and f16 for the mlp (f16: the loss scale
// decided on the device from the all-reduced gradients, kernels/cuda/loss_scale_ops.h, so every
// replica skips alike; a checkpoint counts the optimizer's applied steps, as the CPU's), no
// --accumulate, not elastic.
//
// Declared in every build; built without CUDA it returns `unavailable` saying so.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "collectives/device_communicator.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/checkpoint/collective_write.h"
#include "data/feed/batch_feed.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/setup/train_options.h"

namespace troupe {

struct CudaReplica {
  int device = 0;                                    // this worker's GPU
  collectives::DeviceCommunicator* comm = nullptr;   // null: a job of one replica
  BatchFeed* feed = nullptr;                         // null: this replica's slice of the seeded shuffle
  std::chrono::milliseconds timeout{60000};          // per collective and per wait for the GPU
  const std::atomic<bool>* cancel = nullptr;         // set to stop before the next step (unavailable)
  // Checkpoints, as Replica's (trainers/sync/trainer_driver.h): every `checkpoints.every` steps (0:
  // never) each replica writes its slice under checkpoints.dir; `host` is the job's host group
  // their barrier goes through (null: one replica); rank 0 hands the manifest to checkpoints.commit.
  collectives::Communicator* host = nullptr;
  checkpoint::ReplicaCheckpoints checkpoints;
  // Start from a checkpoint (its parameters, optimizer state and step; the batches of its epoch's
  // steps done are drawn and marked trained without training, as on the CPU). Null: a fresh start.
  const checkpoint::TrainingState* resume = nullptr;
};

// Trains options.model ("mlp" or "cnn") for options.epochs on `replica.device`, evaluating on the whole of
// `test` (every replica: the parameters are the same). `final_params` (if given) receives them.
// Errors: invalid_argument (options this path does not take), unavailable (no such device, built
// without CUDA, stopped), numeric_error (a non-finite loss), a collective's error naming the step.
Expected<TrainResult> train_replica_cuda(const TrainOptions& options, const Dataset& train, const Dataset& test,
                                         const CudaReplica& replica, const ProgressFn& progress = {},
                                         std::vector<float>* final_params = nullptr);

}  // namespace troupe
