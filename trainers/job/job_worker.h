// The body of a job's actors, run on a thread of their own inside a node process
// (trainers/job/job_actors.h): everything between "this actor is rank r of job J" and the job's
// result in the GCS.
//
//   worker (sync):  read the job's spec from the GCS -> fetch and load its trainer library -> load
//                   the dataset -> form the collective group "job-<id>" (shm / tcp / hierarchical by
//                   where the workers are) -> train_replica on batches of the shards it claims
//                   (trainers/job/ledger_feed.h) -> rank 0 records progress, metrics and the result.
//
// Errors name the job, the rank and the step; the actor exits with them, and the head's job
// supervisor fails the job with that reason.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "actors/node_environment.h"
#include "collectives/group_rendezvous.h"
#include "core/ids.h"
#include "core/status.h"
#include "trainers/job/interrupts.h"

namespace troupe::job {

// The arguments of a job actor: {job id hex, index (rank for workers, shard for servers), attempt,
// actor id hex}. The head's job supervisor appends the attempt (0, then 1, 2, ... after restarts)
// and the actor id; for an elastic sync job it puts the gang's current size before them
// ({job, index, world, attempt, actor}).
struct MemberArgs {
  JobId job;
  int index = 0;
  int attempt = 0;
  // An elastic sync job's current size (fewer workers than its shards after a node was lost; the
  // supervisor passes it between the index and the attempt); 0: the spec's workers.
  int world = 0;
  ActorId actor;
  // Set by the actor (not an argument): where the body registers the transports a stop must
  // interrupt. May be null (then a stop waits for the collective's deadline).
  std::shared_ptr<Interrupts> interrupts;
};
Expected<MemberArgs> parse_member_args(const std::vector<std::string>& args);

// The collective group "job-<id>" of a sync job's `world` workers as worker `a` joins it at
// `generation`: its attempt (a restarted gang forms it anew), or a live job's re-formed generation.
collectives::GroupOptions sync_group_options(const actors::NodeEnvironment& env, const MemberArgs& a,
                                             const std::string& transport, int world, int64_t generation);

// Runs worker `args.index` of the job until it ends, fails, or `cancel` is set.
Status run_worker(const actors::NodeEnvironment& env, const MemberArgs& args, const std::atomic<bool>& cancel);

}  // namespace troupe::job
