// Checkpoint manifests in the GCS (table "checkpoints", gcs::CheckpointRecord keyed
// "<job>/<step>"). A manifest is written last, after every shard file it lists is durable, so a
// record names a checkpoint that was complete when written; files can still be damaged or lost
// later, so readers verify every shard before using one.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/records.h"
#include "gcs/store.h"
#include "trainers/checkpoint/checkpoint.h"

namespace troupe::checkpoint {

Manifest from_record(const gcs::CheckpointRecord& r);
gcs::CheckpointRecord to_record(const JobId& job, const Manifest& m);

// Records `m` as job `job`'s checkpoint (the manifest) and an event "checkpoint_written".
Status write_manifest(gcs::Store& store, const JobId& job, const Manifest& m);

// Job `job`'s manifests, newest step first.
Expected<std::vector<gcs::CheckpointRecord>> list_checkpoints(gcs::Store& store, const JobId& job);

// The newest checkpoint of `job` whose every shard file exists with the size and checksum its
// manifest recorded (and decodes). Each newer one skipped is logged and recorded as an event
// "checkpoint_corrupt" naming the file and the defect; `skipped` (if given) receives those reasons.
// not_found when the job has no usable checkpoint (saying how many were skipped).
Expected<gcs::CheckpointRecord> latest_good_checkpoint(gcs::Store& store, const JobId& job,
                                                       std::vector<std::string>* skipped = nullptr);

// Keeps the newest `keep` checkpoints of `job` (by step) and deletes the others: their files and
// step directories first, then their records. Errors deleting files are logged, not returned.
Status prune_checkpoints(gcs::Store& store, const JobId& job, int keep);

}  // namespace troupe::checkpoint
