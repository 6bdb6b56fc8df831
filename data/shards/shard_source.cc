#include "data/shards/shard_source.h"

namespace troupe::data {

Expected<std::optional<IndexChunk>> ShardSource::next() {
  if (named_ >= 0 && given_) return std::optional<IndexChunk>{};
  given_ = named_ >= 0;
  auto claimed = named_ >= 0 ? ledger_.claim_shard(plan_.epoch, named_, worker_) : ledger_.claim(plan_.epoch, worker_);
  if (!claimed.ok()) return claimed.status();
  if (!claimed->has_value()) return std::optional<IndexChunk>{};
  const gcs::ShardRecord& r = **claimed;
  if (r.shard < 0 || r.shard >= static_cast<int>(plan_.shards.size()) ||
      r.examples != static_cast<int64_t>(plan_.shards[static_cast<size_t>(r.shard)].size())) {
    return corrupt_data("shard " + std::to_string(r.shard) + " of epoch " + std::to_string(r.epoch) + " of job " +
                        ledger_.job().short_hex() + " has " + std::to_string(r.examples) +
                        " examples in the GCS but this worker's plan has " + std::to_string(plan_.shards.size()) +
                        " shards" +
                        (r.shard >= 0 && r.shard < static_cast<int>(plan_.shards.size())
                             ? " and " + std::to_string(plan_.shards[static_cast<size_t>(r.shard)].size()) +
                                   " examples in it"
                             : std::string()) +
                        ": the supervisor and this worker planned different data or shard options");
  }
  // A shard released with a resume offset goes on there (the claim set progress to it).
  return std::optional<IndexChunk>(IndexChunk{r.shard, plan_.shards[static_cast<size_t>(r.shard)], r.progress});
}

Status ShardProgress::report(const ChunkProgress& p, bool force) {
  const int shard = static_cast<int>(p.tag);
  if (p.done == p.size) return ledger_.complete(epoch_, shard, worker_);
  if (!force) return {};
  return ledger_.report_progress(epoch_, shard, worker_, p.done);
}

Status ShardProgress::on_batch(const Batch& batch) {
  const bool due = ++batches_ % report_every_ == 0;
  for (const ChunkProgress& p : batch.progress) TROUPE_RETURN_IF_ERROR(report(p, due));
  return {};
}

Status ShardProgress::on_passed(const Batch& batch, bool last) {
  for (const ChunkProgress& p : batch.progress) TROUPE_RETURN_IF_ERROR(report(p, last));
  return {};
}

Status ShardProgress::on_end(const std::vector<ChunkProgress>& dropped) {
  for (const ChunkProgress& p : dropped) TROUPE_RETURN_IF_ERROR(report(p, true));
  return {};
}

}  // namespace troupe::data
