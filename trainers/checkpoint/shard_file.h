// One shard of a checkpoint on disk: a contiguous range [begin, end) of a job's flat parameter
// buffer and the optimizer state of that range, written atomically and checked on every read.
//
// Layout (little-endian, as the hosts troupe builds for):
//
//   offset 0   magic "TRPCKPT1" (8 bytes)
//          8   u32 format version (kShardFormatVersion), u32 header bytes H
//         16   header (H bytes): i64 step, i64 epoch, i64 epoch_step, i32 shard, i32 shards,
//              u64 total_floats, u64 begin, u64 end, i64 optimizer_steps, u32 state_vectors,
//              u32 optimizer name length L, u32 tag length T, then the name (L) and the tag (T bytes:
//              the job id hex)
//   16 + H     payload: params (end - begin f32), then each optimizer state vector (end - begin f32)
//              then (version 2) u64 X and X bytes of `extra`: what the writer keeps beside the
//              parameters (an async parameter server: its applied-data record), opaque here
//   end - 8    u64 xxh64 of everything before it (header and payload: a flipped byte anywhere
//              is caught)
//
// Writing: a temporary file in the same directory, write, fsync, rename over the final name, fsync
// the directory: the final name is either absent or a complete file. Reading checks magic, version,
// the sizes the header implies against the file's, and the checksum; every failure is corrupt_data
// naming the file and what is wrong. Version 1 files (no extra) are still read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "trainers/optim/optimizer.h"

namespace troupe::checkpoint {

constexpr uint32_t kShardFormatVersion = 2;
constexpr uint64_t kMaxShardExtra = 64ull << 20;  // bytes of ShardData::extra

struct ShardHeader {
  std::string tag;            // the job id (hex); "" outside a job
  int64_t step = 0;           // steps done when it was taken (global batches)
  int64_t epoch = 0;          // the epoch of the last step trained (1-based)
  int64_t epoch_step = 0;     // steps of that epoch done
  int32_t shard = 0, shards = 1;
  uint64_t total_floats = 0;  // the whole parameter buffer
  uint64_t begin = 0, end = 0;
};

struct ShardData {
  ShardHeader header;
  std::vector<float> params;  // end - begin floats
  OptimizerState optimizer;   // vectors of end - begin floats each
  std::string extra;          // opaque to the checkpoint (see the layout); at most kMaxShardExtra
};

// Where a shard ended up: what the manifest records of it.
struct WrittenShard {
  std::string path;
  uint64_t bytes = 0;
  std::string checksum;       // xxh64 of the whole file, 16 hex digits
};

// Writes `data` to `path` atomically (see above). io_error naming the step that failed (nothing is
// left at `path` then; the temporary file is removed); invalid_argument for vectors of the wrong size.
Expected<WrittenShard> write_shard_file(const std::string& path, const ShardData& data);

// Reads and checks a shard file. not_found when it does not exist, io_error when it cannot be read,
// corrupt_data naming the file and the defect (bad magic, unknown version, truncated or too long,
// a header that contradicts itself, a checksum mismatch).
Expected<ShardData> read_shard_file(const std::string& path);

// The fixed part of a shard file's header (step, epoch, epoch_step, shard, range; not the tag),
// read from its first bytes alone: magic, version and the range checked, the checksum NOT (that
// needs the whole file) — for a reader that only needs where a checkpoint stands and reads the
// payload, verified, later. Errors as read_shard_file's.
Expected<ShardHeader> read_shard_header(const std::string& path);

// The file still is what a manifest recorded: it exists, has `bytes` bytes and hashes to
// `checksum`. not_found or corrupt_data naming the file and what differs.
Status verify_shard_file(const std::string& path, uint64_t bytes, const std::string& checksum);

// The xxh64 of `size` bytes as 16 hex digits.
std::string xxh64_hex(const void* data, size_t size);

}  // namespace troupe::checkpoint
