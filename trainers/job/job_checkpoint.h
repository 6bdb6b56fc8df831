// The job layer's side of checkpoints (trainers/checkpoint/): the manifest of a step recorded by
// the one member that knows every shard is durable (a sync job's rank 0 after the replicas'
// barrier; a central job's only parameter server; the async server completing a version's set) —
// first mirrored on disk in the step's directory (gcs/checkpoint_mirror.h), then in the GCS — and
// old checkpoints pruned. Which checkpoint a job starts from is trainers/job/sync_recovery.h's.
#pragma once

#include "core/ids.h"
#include "gcs/store.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/job/job_spec.h"

namespace troupe::job {

// <spec.checkpoint_dir>/<job id>: where a job's checkpoints go.
std::string checkpoint_dir(const JobSpec& spec, const JobId& job);

// Records `m` as `job`'s newest checkpoint: its mirror on disk (with steps_per_epoch > 0 — a job
// whose steps are recorded as trained ranges: sync, central, pipeline — the ranges through m.step
// and the ledger's records of the epochs it finished; 0: the manifest alone), then the GCS
// manifest (+ event checkpoint_written); then keeps the newest spec.checkpoint_keep (a pruning
// error is logged, not returned). A mirror that cannot be written is an error: nothing is
// committed, and the job stops as for a shard it could not write.
Status commit_checkpoint(gcs::Store& store, const JobId& job, const JobSpec& spec, const checkpoint::Manifest& m,
                         int64_t steps_per_epoch = 0);

}  // namespace troupe::job
