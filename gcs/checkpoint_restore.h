// A job's checkpoints written back into a GCS that lost its data, from their mirrors on disk
// (gcs/checkpoint_mirror.h). The job supervisor calls it for a sync, central or pipeline job that
// was running when the GCS came back empty (actors/job_gcs_loss.cc); the job then restarts as after
// any failure, and its workers find the checkpoint manifests, the trained ranges and the finished
// epochs of the shard ledger as the newest checkpoint left them (what came after it is trained again).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/checkpoint_mirror.h"
#include "gcs/store.h"

namespace troupe::gcs {

struct MirrorScan {
  std::vector<CheckpointMirror> usable;  // newest step first
  std::vector<std::string> skipped;      // one line per step directory not used: which and why
  int damaged = 0;                       // of those, mirrors that exist but cannot be trusted
};

// Reads the mirror of every step directory (step-*) under `job_dir` (<checkpoint dir>/<job>). One is
// usable when it reads back whole (checksum, versions, contents), is job `job`'s, names its own
// directory, and every shard file it lists exists with the size recorded (the checksums are the
// workers' to verify when they load it: trainers/checkpoint/checkpoint_catalog.h). A step
// directory without a mirror (its commit never happened) is skipped; a damaged mirror too, and
// counted in `damaged`. Blocking file I/O: a few small reads and a stat per shard.
MirrorScan scan_checkpoint_mirrors(const std::string& job_dir, const JobId& job);

struct RestoredCheckpoints {
  int64_t step = 0;            // the newest usable checkpoint's
  int checkpoints = 0;         // manifests written back
  size_t ranges = 0;           // trained ranges written back (the newest one's)
  size_t ledger_records = 0;   // shard records written back (the newest one's)
  MirrorScan scan;             // what was read, and what was skipped
};

// Writes back into `store` every usable manifest under `job_dir`, then the newest one's trained
// ranges and ledger records. A restarted attempt that finds the newest damaged after all (a
// checksum) starts from an older one and rewinds the ranges and ledger past it, as after any
// failure. not_found, naming `job_dir` and each directory skipped, when none is usable; GCS errors
// as they come.
Expected<RestoredCheckpoints> restore_checkpoint_mirrors(Store& store, const JobId& job, const std::string& job_dir);

}  // namespace troupe::gcs
