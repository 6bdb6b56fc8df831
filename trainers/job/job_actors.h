// The actor types of training jobs, registered in every node process (and the head):
//
//   troupe.worker   a trainer replica: args {job id, rank, actor id} (trainers/job/job_worker.h)
//   troupe.ps       a parameter-server shard of an async job: args {job id, shard, actor id}
//   troupe.predictor  a prediction job's predictor: args {job id, index, actor id}
//                   (trainers/job/predict_worker.h)
//
// Each is a detached CAF actor that runs its job on a thread of its own, so a long training loop
// never holds a scheduler thread. The actor exits normally when its part of the job is done and
// with the error otherwise (the node manager reports it crashed with that reason; the head's job
// supervisor fails the job). Stopping the actor (troupe stop, a failed job) sets a flag the loop
// checks before every step, and the actor waits for its thread to end.
#pragma once

#include <memory>

#include "actors/node_environment.h"
#include "actors/registry.h"
#include "core/status.h"

namespace troupe::job {

constexpr const char* kWorkerActorType = "troupe.worker";
constexpr const char* kServerActorType = "troupe.ps";

// Adds the three types to `registry`; their actors read the node's environment from `env`, and in it the
// GPUs their node manager gave them (NodeEnvironment::gpus, looked up by their actor id, args[2]).
Status add_job_actor_types(actors::Registry& registry, std::shared_ptr<actors::NodeEnvironmentSlot> env);

}  // namespace troupe::job
