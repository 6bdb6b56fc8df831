#include "trainers/checkpoint/collective_write.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace troupe::checkpoint {

Status ReplicaCheckpoints::check() const {
  if (every > 0 && dir.empty())
    return invalid_argument("checkpoints every " + std::to_string(every) + " steps need a directory");
  return {};
}

Status write_group_shard(ShardData shard, const std::string& dir, collectives::Communicator* group,
                         std::chrono::milliseconds timeout, int committer, const CommitFn& commit) {
  const int rank = group ? group->rank() : 0, size = group ? group->size() : 1;
  const int64_t step = shard.header.step;
  const std::string what = "checkpoint of step " + std::to_string(step);
  const std::string sdir = step_dir(dir, step);
  shard.header.shard = rank;
  shard.header.shards = size;
  Expected<WrittenShard> written = io_error("not written");
  std::error_code ec;
  std::filesystem::create_directories(sdir, ec);
  if (ec) written = io_error("cannot create checkpoint directory " + sdir + ": " + ec.message());
  else written = write_shard_file(shard_path(sdir, rank, size), shard);
  // Every member's (bytes, checksum) — bytes 0 for a member whose write failed.
  uint64_t mine[2] = {0, 0};
  if (written.ok()) {
    mine[0] = written->bytes;
    mine[1] = std::strtoull(written->checksum.c_str(), nullptr, 16);
  }
  std::vector<uint64_t> all(2 * static_cast<size_t>(size));
  if (group) {
    collectives::CollectiveOptions co;
    co.timeout = timeout;
    TROUPE_RETURN_IF_ERROR(group->allgather(mine, all.data(), 4, DType::f32, co)  // 2 x u64 as 4 opaque words
                               .with_context("gathering the shards of the " + what));
  } else {
    all.assign(mine, mine + 2);
  }
  if (!written.ok()) return written.status().with_context(what);
  for (int r = 0; r < size; ++r)
    if (all[2 * static_cast<size_t>(r)] == 0)
      return io_error(what + ": member " + std::to_string(r) + " of " + std::to_string(size) +
                      " could not write its shard (see its log)");
  if (rank != committer || !commit) return {};
  Manifest m;
  m.tag = shard.header.tag;
  m.step = step;
  m.dir = sdir;
  for (int r = 0; r < size; ++r) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(all[2 * static_cast<size_t>(r) + 1]));
    m.shards.push_back(WrittenShard{shard_path(sdir, r, size), all[2 * static_cast<size_t>(r)], hex});
  }
  return commit(m).with_context(what);
}

Status write_replica_checkpoint(const ReplicaPoint& at, size_t total, const SliceFn& fill, const std::string& dir,
                                collectives::Communicator* group, std::chrono::milliseconds timeout,
                                const CommitFn& commit) {
  const int rank = group ? group->rank() : 0, world = group ? group->size() : 1;
  ShardData d;  // shard `rank` of `world`: write_group_shard numbers it
  d.header.tag = at.tag;
  d.header.step = at.step;
  d.header.epoch = at.epoch;
  d.header.epoch_step = at.epoch_step;
  d.header.total_floats = total;
  size_t begin = 0, end = 0;
  shard_range(total, rank, world, &begin, &end);
  d.header.begin = begin;
  d.header.end = end;
  TROUPE_RETURN_IF_ERROR(fill(begin, end, &d).with_context("the checkpoint of step " + std::to_string(at.step)));
  return write_group_shard(std::move(d), dir, group, timeout, 0, commit);
}

}  // namespace troupe::checkpoint
