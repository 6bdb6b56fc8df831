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
#include <functional>
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

// A sync job's replicas' checkpoint settings (trainer_driver.h Replica, cuda_replica.h
// CudaReplica): every `every` steps (0: never) each replica writes its shard under `dir`, `tag` (the
// job id) in every shard's header; rank 0 hands the manifest to `commit` (may be empty: then
// nothing is recorded).
struct ReplicaCheckpoints {
  int64_t every = 0;
  std::string dir;
  std::string tag;
  CommitFn commit;
  // invalid_argument when checkpoints are asked for without a directory.
  Status check() const;
};

// Where a sync job's replicas are when they checkpoint.
struct ReplicaPoint {
  std::string tag;          // the job id, in every shard's header
  int64_t step = 0;         // global steps done
  int epoch = 0;            // the epoch of the last step
  int64_t epoch_step = 0;   // steps of that epoch done
};
// Fills shard.params and shard.optimizer with [begin, end) of the parameters and of every optimizer
// vector (the header is set already).
using SliceFn = std::function<Status(size_t begin, size_t end, ShardData* shard)>;

// A sync job's replicas (every one holds the same `total` floats of state): replica rank of
// `group` writes its 1/size slice (shard_range), filled by `fill`, then as write_group_shard with
// rank 0 committing. The CPU replicas fill from host vectors, the GPU ones copy from the device.
Status write_replica_checkpoint(const ReplicaPoint& at, size_t total, const SliceFn& fill, const std::string& dir,
                                collectives::Communicator* group, std::chrono::milliseconds timeout,
                                const CommitFn& commit);

}  // namespace troupe::checkpoint
