// A sync job's worker on a GPU (`troupe submit --strategy sync --gpus-per-worker G`): the same
// collective group, shard ledger, restarts and data accounting as a CPU worker (job_worker.cc), but
// training through train_replica_cuda (trainers/cuda/cuda_replica.h) on the device its node manager
// gave it (NodeEnvironment::gpus). Gradients go through NCCL when every worker has a whole GPU
// (G = 1) and this troupe has NCCL, else through the staged path over the job's host group (ranks
// sharing a GPU, G < 1). What it cannot do yet is refused by the job spec (job_spec.cc). An async
// job's GPU workers are parameter-server workers (ps_member.h, trainers/cuda/cuda_ps_worker.h).
#pragma once

#include <atomic>

#include "actors/node_environment.h"
#include "trainers/job/job_setup.h"
#include "trainers/job/job_worker.h"

namespace troupe::job {

// The GPU the node manager gave worker `a` (its first device), or unavailable naming the node and
// what it offers (a job asking for GPUs placed where none was handed out).
Expected<int> worker_gpu(const actors::NodeEnvironment& env, const MemberArgs& a, const JobSpec& spec);

Status run_sync_gpu(const actors::NodeEnvironment& env, const MemberArgs& a, JobSetup& s,
                    const std::atomic<bool>& cancel);

}  // namespace troupe::job
