// Writing one checkpoint shard per member of a group and committing the manifest once every
// member's shard is durable: a sync job's replicas (shard r of N: slice r of the flat buffer) and a
// pipeline's stages (shard s of K: stage s's layers) both checkpoint this way.
//
//   each member: write_shard_file(step_dir/shard-<rank>-of-<size>.ckpt) -> all-gather every
//   member's (bytes, checksum) -> the committing rank: the manifest (the shards in rank order) to
//   `commit`
//
// The all-gather is the step barrier: no manifest names a shard that is not yet on disk, and a
// member whose write failed makes every member fail the checkpoint, naming it.
#pragma once

#include <chrono>
#include <string>

#include "collectives/communicator.h"
#include "core/status.h"
#include "trainers/checkpoint/checkpoint.h"

namespace troupe::checkpoint {

// `shard.header.shard`/`shards` are set from `group` (null: a group of one). `dir` is the job's
// checkpoint directory (the step's directory under it is created). `commit` is called on rank
// `committer` only (may be empty).
Status write_group_shard(ShardData shard, const std::string& dir, collectives::Communicator* group,
                         std::chrono::milliseconds timeout, int committer, const CommitFn& commit);

}  // namespace troupe::checkpoint
