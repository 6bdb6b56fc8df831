#include "trainers/job/ps_checkpoint.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "trainers/job/job_checkpoint.h"

namespace troupe::job {
namespace {

std::string key(const JobId& job, int64_t version, const std::string& what) {
  return job.hex() + "/" + std::to_string(version) + "/" + what;
}

}  // namespace

int64_t async_checkpoint_versions(const JobSpec& spec) { return spec.checkpoint_every * spec.workers; }

Status record_async_shard(gcs::Store& store, const JobId& job, const JobSpec& spec, int shard, int shards,
                          const checkpoint::WrittenShard& written, int64_t version) {
  const std::string what = "recording shard " + std::to_string(shard) + " of the checkpoint of version " +
                           std::to_string(version) + " in the GCS table " + kPsCheckpointShardsTable;
  const nlohmann::json mine = {{"path", written.path}, {"bytes", written.bytes}, {"checksum", written.checksum}};
  TROUPE_RETURN_IF_ERROR(store.put(kPsCheckpointShardsTable, key(job, version, std::to_string(shard)), mine.dump())
                             .with_context(what));
  // Everyone's records, in shard order; the set is complete once all P are there.
  checkpoint::Manifest m;
  m.tag = job.hex();
  m.step = version;
  m.dir = checkpoint::step_dir(checkpoint_dir(spec, job), version);
  for (int s = 0; s < shards; ++s) {
    auto v = store.get(kPsCheckpointShardsTable, key(job, version, std::to_string(s)));
    if (!v.ok()) return v.status().with_context(what);
    if (!v->has_value()) return {};  // a server has not written it yet: the last one will commit
    auto j = nlohmann::json::parse(**v, nullptr, false);
    if (j.is_discarded() || !j.contains("path") || !j.contains("bytes") || !j.contains("checksum"))
      return corrupt_data(what + ": the record of shard " + std::to_string(s) + " is not {path, bytes, checksum}");
    m.shards.push_back({j["path"].get<std::string>(), j["bytes"].get<uint64_t>(), j["checksum"].get<std::string>()});
  }
  auto claimed = store.put_if_absent(kPsCheckpointShardsTable, key(job, version, "manifest"), std::to_string(shard));
  if (!claimed.ok()) return claimed.status().with_context(what + ": claiming the manifest");
  if (!*claimed) return {};  // another server completed the set at the same time and writes it
  TROUPE_RETURN_IF_ERROR(commit_checkpoint(store, job, spec, m).with_context(what));
  spdlog::info("job {}: checkpoint of version {} complete ({} shards), manifest written by server {}", job.short_hex(),
               version, shards, shard);
  for (int s = 0; s < shards; ++s) {
    Status st = store.remove(kPsCheckpointShardsTable, key(job, version, std::to_string(s)));
    if (!st.ok()) spdlog::warn("job {}: removing a shard record of version {}: {}", job.short_hex(), version, st.to_string());
  }
  return {};
}

}  // namespace troupe::job
