#include "gcs/checkpoint_restore.h"

#include <algorithm>
#include <filesystem>

#include "gcs/tables.h"

namespace troupe::gcs {
namespace {

namespace fs = std::filesystem;

// Every shard file the manifest lists exists with the size it recorded.
Status shards_present(const CheckpointRecord& c) {
  for (const CheckpointShard& s : c.shards) {
    std::error_code ec;
    const uintmax_t size = fs::file_size(s.path, ec);
    if (ec) return not_found("its shard " + s.path + " cannot be read: " + ec.message());
    if (size != s.bytes)
      return corrupt_data("its shard " + s.path + " has " + std::to_string(size) + " bytes, the manifest says " +
                          std::to_string(s.bytes));
  }
  return {};
}

}  // namespace

MirrorScan scan_checkpoint_mirrors(const std::string& job_dir, const JobId& job) {
  MirrorScan scan;
  std::error_code ec;
  std::vector<fs::path> dirs;
  for (fs::directory_iterator it(job_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("step-", 0) == 0 && it->is_directory()) dirs.push_back(it->path());
  }
  if (ec) {
    scan.skipped.push_back("checkpoint directory " + job_dir + " cannot be read: " + ec.message());
    return scan;
  }
  for (const fs::path& dir : dirs) {
    const std::string path = mirror_path(dir.string());
    auto m = read_checkpoint_mirror(path);
    Status st = m.status();
    if (st.code() == Code::not_found) {
      scan.skipped.push_back(dir.string() + " has no manifest (its checkpoint was never committed)");
      continue;
    }
    if (st.ok() && m->manifest.job != job)
      st = corrupt_data("checkpoint manifest " + path + " is job " + m->manifest.job.short_hex() + "'s, not " + job.short_hex() + "'s");
    if (st.ok() && fs::path(m->manifest.dir).lexically_normal() != dir.lexically_normal())
      st = corrupt_data("checkpoint manifest " + path + " names directory " + m->manifest.dir + " (moved?)");
    if (st.ok()) st = shards_present(m->manifest).with_context("checkpoint manifest " + path);
    if (!st.ok()) {
      scan.skipped.push_back(st.message());
      ++scan.damaged;
      continue;
    }
    scan.usable.push_back(std::move(*m));
  }
  std::sort(scan.usable.begin(), scan.usable.end(),
            [](const CheckpointMirror& a, const CheckpointMirror& b) { return a.manifest.step > b.manifest.step; });
  return scan;
}

Expected<RestoredCheckpoints> restore_checkpoint_mirrors(Store& store, const JobId& job, const std::string& job_dir) {
  RestoredCheckpoints out;
  out.scan = scan_checkpoint_mirrors(job_dir, job);
  if (out.scan.usable.empty()) {
    std::string why = "no usable checkpoint manifest under " + job_dir;
    for (size_t i = 0; i < out.scan.skipped.size() && i < 5; ++i) why += (i ? "; " : ": ") + out.scan.skipped[i];
    return not_found(why);
  }
  std::vector<CheckpointRecord> manifests;
  for (const CheckpointMirror& m : out.scan.usable) manifests.push_back(m.manifest);
  const CheckpointMirror& newest = out.scan.usable.front();
  // Ranges and ledger first, manifests last: a manifest in the GCS always comes with its steps
  // recorded (the order rank 0 commits in).
  if (!newest.trained.empty())
    TROUPE_RETURN_IF_ERROR(Table<TrainedRange>(store).put_many(newest.trained).with_context("writing back the trained ranges"));
  if (!newest.ledger.empty())
    TROUPE_RETURN_IF_ERROR(Table<ShardRecord>(store).put_many(newest.ledger).with_context("writing back the shard ledger"));
  TROUPE_RETURN_IF_ERROR(Table<CheckpointRecord>(store).put_many(manifests).with_context("writing back the checkpoint manifests"));
  out.step = newest.manifest.step;
  out.checkpoints = static_cast<int>(manifests.size());
  out.ranges = newest.trained.size();
  out.ledger_records = newest.ledger.size();
  return out;
}

}  // namespace troupe::gcs
