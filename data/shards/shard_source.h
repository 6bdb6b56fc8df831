// The glue between a worker's input pipeline and the shard ledger: ShardSource feeds the pipeline
// the shards the worker claims, one claim per chunk, in the order of the epoch's plan; ShardProgress
// tells the ledger what the worker has trained, batch by batch, so shards are completed (and a dead
// worker's unfinished ones can be released to others).
#pragma once

#include "data/feed/input_pipeline.h"
#include "data/shards/shard_ledger.h"
#include "data/shards/shard_plan.h"

namespace troupe::data {

// Each next() claims the next shard of `plan`'s epoch for `worker` and returns its indices, tagged
// with the shard number; the end when no shard is left to claim. corrupt_data when the ledger's
// size of a shard differs from the plan's (supervisor and worker planned different data or
// options). The ledger and plan must outlive the source. With a `named` shard (>= 0: a lockstep
// worker's own, ShardLedger::claim_shard) the source gives that one shard once, or nothing when it
// is DONE, instead of the lowest free one.
class ShardSource final : public IndexSource {
 public:
  ShardSource(ShardLedger& ledger, const ShardPlan& plan, WorkerId worker, int named = -1)
      : ledger_(ledger), plan_(plan), worker_(worker), named_(named) {}
  Expected<std::optional<IndexChunk>> next() override;

 private:
  ShardLedger& ledger_;
  const ShardPlan& plan_;
  WorkerId worker_;
  int named_;
  bool given_ = false;  // the named shard was claimed already
};

// Reports a worker's batches to the ledger after it trained on them: every shard a batch finished
// is completed at once; the progress of a shard still in flight is reported every
// `report_every` batches (two round trips each, so not every batch).
class ShardProgress {
 public:
  ShardProgress(ShardLedger& ledger, int epoch, WorkerId worker, int report_every = 8)
      : ledger_(ledger), epoch_(epoch), worker_(worker), report_every_(report_every < 1 ? 1 : report_every) {}
  // After training on `batch`. not_found from the ledger means the shard was taken from this
  // worker (it was presumed dead): stop training this epoch's data and claim again.
  Status on_batch(const Batch& batch);
  // After passing over `batch` (trained before this worker started: a resumed loop's done steps):
  // completes the shards it finished and reports nothing else, but for the `last` of the pass,
  // whose progress is reported — one report for the whole pass, not one every report_every.
  Status on_passed(const Batch& batch, bool last);
  // After the pipeline ended: completes the shards of the tail the drop policy left out.
  Status on_end(const std::vector<ChunkProgress>& dropped);

 private:
  Status report(const ChunkProgress& p, bool force);

  ShardLedger& ledger_;
  int epoch_;
  WorkerId worker_;
  int report_every_;
  int64_t batches_ = 0;
};

}  // namespace troupe::data
