// A sync job's worker on a GPU (`troupe submit --strategy sync --gpus-per-worker G`): the same
// collective group, shard ledger, restarts and data accounting as a CPU worker (job_worker.cc), but
// training through train_replica_cuda (trainers/cuda_replica.h) on the device its node manager
// gave it (NodeEnvironment::gpus). Gradients go through NCCL when every worker has a whole GPU
// (G = 1) and this troupe has NCCL, else through the staged path over the job's host group (ranks
// sharing a GPU, G < 1). What it cannot do yet is refused by the job spec (job_spec.cc).
#pragma once

#include <atomic>

#include "actors/node_environment.h"
#include "trainers/job/job_setup.h"
#include "trainers/job/job_worker.h"

namespace troupe::job {

Status run_sync_gpu(const actors::NodeEnvironment& env, const MemberArgs& a, JobSetup& s,
                    const std::atomic<bool>& cancel);

}  // namespace troupe::job
