// The parameter-server side of jobs: the `async` strategy (parameters sharded over --ps N server
// actors, workers pull and push without waiting for each other beyond --staleness) and `central`
// (one server actor holds all variables; each step's gradients of all workers are averaged and
// applied once). The shards, protocol and worker loop are trainers/ps/; this file hosts them in job
// actors.
//
//   server s:  prepare -> make_job_shard(s) -> PsServer on the node's bind address, any port ->
//              its address under job_servers/<job>/<s> in the GCS -> serve until stopped (the
//              head's job supervisor stops the servers once every worker ended). With
//              --checkpoint-every it writes its range at common versions (ps_checkpoint.h). An
//              async server of attempt > 0 replaces a failed one: it restores its range from the
//              job's newest intact checkpoint (event server_restored) and publishes under the
//              same key; the workers' clients redial it there (ps_client.h).
//   worker r:  prepare -> wait (bounded) for every server's address -> connect_ps -> shards of the
//              ledger through the input pipeline (async: --shard-policy, several shards per worker,
//              taken as workers get to them; central: one interleaved shard per epoch, as sync) ->
//              train_ps_worker (with --gpus-per-worker, async: train_ps_worker_cuda on the device
//              its node manager gave it, trainers/cuda/cuda_ps_worker.h) -> rank 0 records progress,
//              metrics and the result.
#pragma once

#include <atomic>

#include "actors/node_environment.h"
#include "core/status.h"
#include "trainers/job/job_setup.h"
#include "trainers/job/job_worker.h"

namespace troupe::job {

constexpr const char* kJobServersTable = "job_servers";

// Parameter-server actors a job runs: --ps for async, 1 for central, 0 for sync.
int server_count(const JobSpec& spec);

Status run_server(const actors::NodeEnvironment& env, const MemberArgs& args, const std::atomic<bool>& cancel);
Status run_ps_worker(const actors::NodeEnvironment& env, const MemberArgs& args, JobSetup& setup,
                     const std::atomic<bool>& cancel);

}  // namespace troupe::job
