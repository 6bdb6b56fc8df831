// The data of a job's worker: shards of each epoch claimed from the job's shard ledger in the GCS
// (data/shards/shard_ledger.h), batched ahead on background threads by the input pipeline,
// progress reported back as batches are trained, so the ledger always says which examples of an
// epoch were trained and by whom.
//
// Every worker plans the same epochs (a pure function of the seed) and records them in the ledger
// (idempotent), so no one waits for a coordinator to do it. In a sync job (one_shard_per_epoch)
// each worker trains exactly one shard per epoch, in lockstep with the others: with the interleaved
// plan of S = workers shards and blocks of the per-worker batch, the t-th batches of all shards
// together are the t-th global batch of `troupe train`. Rank r trains shard r (named_shards), not
// whichever is free when it asks, so the same seed gives the same bits.
//
// An elastic sync job running with fewer workers than shards (shards_per_step > 1) gives a worker
// several shards per epoch, trained side by side: each is claimed by name by its own lane (an input
// pipeline of batch_size rows; rank r of N' the shards r, r + N', ...), and a step's batch is the lanes' t-th batches joined, so the
// workers' batches together are still the t-th global batch. Each lane's shard is completed on its
// own.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "core/ids.h"
#include "gcs/store.h"
#include "data/feed/batch_feed.h"
#include "data/feed/input_pipeline.h"
#include "data/shards/shard_ledger.h"
#include "data/shards/shard_plan.h"
#include "data/shards/shard_source.h"

namespace troupe::job {

struct LedgerFeedOptions {
  data::ShardPlanOptions plan;
  int64_t batch_size = 32;          // this worker's batch (of each lane: shards_per_step > 1)
  bool one_shard_per_epoch = false; // sync: each lane trains one shard per epoch
  int shards_per_step = 1;          // sync: lanes, each one shard's batch_size rows of every step
  // Lockstep (sync, central): the shard each lane trains every epoch, by name (rank r of N: r, r + N,
  // ...), so a rank trains the same rows run to run and the ranks' sums add up in one order. Empty:
  // each claim takes the lowest free shard, first come (async: a fast worker trains more).
  std::vector<int> named_shards;
  int threads = 2;                  // input pipeline producers
  int depth = 4;
  int report_every = 8;             // batches between progress reports of a shard
  // The last batch of the epoch, when fewer rows are left: trained (async: every example of every
  // shard goes into an update exactly once, which the servers can then show; sync with --last-batch
  // pad: the padded last step, where the lanes that still have rows make the step's batch) or
  // dropped (sync, central: whole global batches only, like `troupe train`).
  bool keep_partial = false;
};

// How many of `shards` shards per epoch worker `rank` of `world` trains in an elastic sync job: those
// s with s % world == rank (every shard once over the workers; world need not divide shards).
int shards_of(int rank, int world, int shards);

// A sync job's feed for worker `rank` of `world`: `shards` interleaved shards per epoch (the
// submitted --workers) in blocks of global_batch / shards rows, one shard per lane per epoch, and
// shards_of(rank, world, shards) lanes (1 at full size).
LedgerFeedOptions sync_feed_options(uint64_t seed, int64_t global_batch, int shards, int rank, int world);

class LedgerFeed final : public BatchFeed {
 public:
  // `data` and `store` must outlive the feed.
  LedgerFeed(const Dataset& data, gcs::Store& store, JobId job, WorkerId worker, LedgerFeedOptions options);
  ~LedgerFeed() override;

  // Stops the lanes' producer threads first: they run the old transform, which may refer to a
  // trainer about to go (a loop clears it as it returns).
  void set_transform(ExampleTransform t) override;
  Status begin_epoch(int epoch) override;
  void pass_over(int64_t batches) override { pass_over_ = batches; }  // hollow batches, every lane
  Expected<bool> next(Batch* out) override;
  Status trained() override;
  Status end_epoch() override;
  double data_wait_ms() const override;
  // From the ledger when the epoch began: DONE shards whole, others as far as their owners
  // reported or a resumed claim starts (resume_at).
  int64_t examples_done_at_start() const override { return done_at_start_; }
  // The shards and offsets of the batch last returned (one lane: an async or central worker's);
  // empty with several lanes (an elastic sync worker: its data is accounted by steps).
  DataTag position() const override;
  // Gathered from the epochs' plans (trainers/job/tagged_rows.h).
  Status rows_of(const DataTag& tag, GatheredRows* out) override;

 private:
  const Dataset& data_;
  gcs::Store& store_;
  JobId job_;
  WorkerId worker_;
  LedgerFeedOptions options_;
  data::ShardLedger ledger_;
  int epoch_ = 0;
  int64_t done_at_start_ = 0;
  data::ShardPlan plan_;
  // One shard at a time per lane (a sync job's worker at full size has one lane).
  struct Lane {
    std::unique_ptr<data::InputPipeline> pipeline;
    std::unique_ptr<data::ShardProgress> progress;
    std::optional<data::Batch> current;
    std::vector<int64_t> held;      // shards this lane took this epoch
    bool ended = false;             // the pipeline returned its end
  };
  std::vector<Lane> lanes_;
  std::vector<float> joined_inputs_;  // several lanes: the step's batch, lane by lane
  std::vector<int32_t> joined_labels_;
  std::vector<float> joined_targets_;
  DataSpec spec_;
  BatchFields fields_;
  double wait_ms_done_ = 0;         // data wait of finished epochs
  int64_t pass_over_ = 0;           // the next epoch's first batches delivered hollow
  int64_t hollow_ = 0, delivered_ = 0;  // this epoch's: batches delivered hollow, batches delivered
  std::map<int, data::ShardPlan> tag_plans_;  // rows_of's plans, by epoch
};

}  // namespace troupe::job
