// An async job's checkpoints (trainers/ps/parameter_shard.h): P parameter servers each write their
// range at every multiple of the job's checkpoint interval in versions (updates applied, common to
// all shards), independently, inside their update. The manifest must come after all P files are
// durable, and exactly once:
//
//   server s wrote the file of version v  -> put "<job>/<v>/<s>" = {path, bytes, checksum}
//                                             in table "ps_checkpoint_shards"
//                                          -> reads "<job>/<v>/0..P-1"; if all P are there, claims
//                                             "<job>/<v>/manifest" (put_if_absent); the claimant
//                                             writes the manifest (commit_checkpoint), then
//                                             removes the P shard records
//
// Each server puts before it reads, so the last of the P to put sees all of them; the claim makes
// only one write the manifest. A version whose set never completes (a server died before writing
// it) gets no manifest: its files are never used.
#pragma once

#include <cstdint>

#include "core/ids.h"
#include "gcs/store.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/job/job_spec.h"

namespace troupe::job {

constexpr const char* kPsCheckpointShardsTable = "ps_checkpoint_shards";

// An async job's checkpoint interval in versions: --checkpoint-every steps of every worker.
int64_t async_checkpoint_versions(const JobSpec& spec);

// Server `shard` of `shards` wrote `written`, its file of `version`: records it, and writes the
// manifest if it completes the set (see above). Errors: the GCS's (the server then stops, naming it).
Status record_async_shard(gcs::Store& store, const JobId& job, const JobSpec& spec, int shard, int shards,
                          const checkpoint::WrittenShard& written, int64_t version);

}  // namespace troupe::job
