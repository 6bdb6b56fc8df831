// The job layer's side of checkpoints (trainers/checkpoint/): the manifest of a step recorded in
// the GCS by the one member that knows every shard is durable (a sync job's rank 0 after the
// replicas' barrier; a central job's only parameter server) and old checkpoints pruned. Which
// checkpoint a job starts from is trainers/job/sync_recovery.h's.
#pragma once

#include "core/ids.h"
#include "gcs/store.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/job/job_spec.h"

namespace troupe::job {

// <spec.checkpoint_dir>/<job id>: where a job's checkpoints go.
std::string checkpoint_dir(const JobSpec& spec, const JobId& job);

// Records `m` as `job`'s newest checkpoint (manifest + event checkpoint_written), then keeps the
// newest spec.checkpoint_keep (a pruning error is logged, not returned).
Status commit_checkpoint(gcs::Store& store, const JobId& job, const JobSpec& spec, const checkpoint::Manifest& m);

}  // namespace troupe::job
