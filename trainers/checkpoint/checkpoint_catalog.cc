#include "trainers/checkpoint/checkpoint_catalog.h"

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "gcs/events.h"
#include "gcs/tables.h"

namespace troupe::checkpoint {

Manifest from_record(const gcs::CheckpointRecord& r) {
  Manifest m;
  m.tag = r.job.hex();
  m.step = r.step;
  m.dir = r.dir;
  for (const gcs::CheckpointShard& s : r.shards) m.shards.push_back(WrittenShard{s.path, s.bytes, s.checksum});
  return m;
}

gcs::CheckpointRecord to_record(const JobId& job, const Manifest& m) {
  gcs::CheckpointRecord r;
  r.job = job;
  r.step = m.step;
  r.dir = m.dir;
  for (const WrittenShard& s : m.shards) r.shards.push_back(gcs::CheckpointShard{s.path, s.bytes, s.checksum});
  r.written_ms = gcs::now_ms();
  return r;
}

Status write_manifest(gcs::Store& store, const JobId& job, const Manifest& m) {
  TROUPE_RETURN_IF_ERROR(gcs::Table<gcs::CheckpointRecord>(store).put(to_record(job, m))
                             .with_context("recording the checkpoint of step " + std::to_string(m.step)));
  gcs::Event e;
  e.kind = "checkpoint_written";
  e.subject = job.hex();
  e.message = "job " + job.short_hex() + ": checkpoint of step " + std::to_string(m.step) + " in " + m.dir + " (" +
              std::to_string(m.shards.size()) + " shards)";
  return gcs::record_event(store, e);
}

Expected<std::vector<gcs::CheckpointRecord>> list_checkpoints(gcs::Store& store, const JobId& job) {
  auto all = gcs::Table<gcs::CheckpointRecord>(store).list();
  if (!all.ok()) return all.status().with_context("listing checkpoints");
  std::vector<gcs::CheckpointRecord> mine;
  for (gcs::CheckpointRecord& r : *all)
    if (r.job == job) mine.push_back(std::move(r));
  std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  return mine;
}

Expected<gcs::CheckpointRecord> latest_good_checkpoint(gcs::Store& store, const JobId& job,
                                                       std::vector<std::string>* skipped) {
  auto records = list_checkpoints(store, job);
  if (!records.ok()) return records.status();
  int bad = 0;
  for (const gcs::CheckpointRecord& r : *records) {
    Status st;
    const Manifest m = from_record(r);
    if (m.shards.empty()) st = corrupt_data("its manifest lists no shards");
    for (size_t i = 0; i < m.shards.size() && st.ok(); ++i) {
      st = verify_shard_file(m.shards[i].path, m.shards[i].bytes, m.shards[i].checksum);
      if (st.ok()) st = read_shard_file(m.shards[i].path).status();
    }
    if (st.ok()) return r;
    ++bad;
    const std::string why = "checkpoint of step " + std::to_string(r.step) + " of job " + job.short_hex() +
                            " is not usable: " + st.message();
    spdlog::warn("{}; trying an older one", why);
    if (skipped) skipped->push_back(why);
    gcs::Event e;
    e.kind = "checkpoint_corrupt";
    e.subject = job.hex();
    e.message = why;
    Status recorded = gcs::record_event(store, e);
    if (!recorded.ok()) spdlog::warn("recording event checkpoint_corrupt: {}", recorded.to_string());
  }
  return not_found("job " + job.hex() + " has no usable checkpoint (" + std::to_string(records->size()) +
                   " recorded, " + std::to_string(bad) + " damaged or incomplete)");
}

Status prune_checkpoints(gcs::Store& store, const JobId& job, int keep) {
  auto records = list_checkpoints(store, job);
  if (!records.ok()) return records.status();
  gcs::Table<gcs::CheckpointRecord> table(store);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < records->size(); ++i) {
    const gcs::CheckpointRecord& r = (*records)[i];
    // Files first: a record whose files are gone is skipped by readers; files without a record are
    // garbage nobody finds.
    std::error_code ec;
    std::filesystem::remove_all(r.dir, ec);
    if (ec) spdlog::warn("deleting old checkpoint {}: {}", r.dir, ec.message());
    TROUPE_RETURN_IF_ERROR(table.remove(gcs::record_key(r)).with_context("deleting the record of checkpoint " + r.dir));
  }
  return {};
}

}  // namespace troupe::checkpoint
