// Exactly-once data accounting of a sync job, provable from the GCS alone.
//
// A sync job's replicas train every shard of an epoch in lockstep (trainers/job/ledger_feed.h), so
// "which examples went into the model" is "which steps of each epoch were kept". A step is kept
// once it is durable: in a checkpoint whose manifest was written, or in the finished job. Rank 0
// records each durable stretch as a TrainedRange when it becomes durable (a checkpoint committed,
// the job done). Steps trained after the last checkpoint by an attempt that then failed are never
// recorded: the restarted attempt rolls the parameters back to that checkpoint and trains them
// again. A restarted attempt first discards the ranges of earlier attempts beyond the checkpoint it
// resumes from (a rank 0 that died between recording its last range and the job's result).
//
// The proof (account_sync_job): for every epoch, the kept ranges tile [0, steps per epoch) — no
// step missing, none kept twice — and the shard ledger shows every shard of every epoch DONE.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/records.h"
#include "gcs/store.h"

namespace troupe::gcs {

// Steps [first_step, end_step) of `epoch` (epoch-local, 0-based) of job `job`, kept by attempt
// `attempt` (0 = the first run, 1 = after the first restart, ...). Table "trained_ranges", key
// "<job>/<epoch>/<first_step>".
struct TrainedRange {
  JobId job;
  int attempt = 0;
  int epoch = 0;
  int64_t first_step = 0;
  int64_t end_step = 0;
  int64_t global_end_step = 0;  // the job's step count after end_step (orders ranges across epochs)
  int64_t recorded_ms = 0;
};
std::string encode(const TrainedRange& r);
Status decode(const std::string& bytes, TrainedRange* out);
std::string record_key(const TrainedRange& r);
template <> struct TableName<TrainedRange> { static constexpr const char* value = "trained_ranges"; };

// Records the steps from (from_epoch, from_step) to (to_epoch, to_step) — epoch-local positions,
// `to_step` exclusive, `global_to` the job's step count at the end — as one range per epoch
// touched. Nothing is written when the two positions are equal.
Status record_trained(Store& store, const JobId& job, int attempt, int from_epoch, int64_t from_step, int to_epoch,
                      int64_t to_step, int64_t steps_per_epoch, int64_t global_to);

// Removes the job's ranges that end after global step `global_step` (a restart resuming there);
// returns how many were removed.
Expected<int> discard_ranges_after(Store& store, const JobId& job, int64_t global_step);

// The job's ranges, ordered by epoch and first step.
Expected<std::vector<TrainedRange>> trained_ranges(Store& store, const JobId& job);

struct AccountingReport {
  bool exactly_once = false;
  int epochs = 0;
  int shards = 0;                  // per epoch
  int64_t steps_per_epoch = 0;
  int attempts = 0;                // distinct attempts that kept steps
  int64_t reclaimed_shards = 0;    // shard claims beyond the first (retrained after a restart)
  std::vector<std::string> problems;  // each missing, doubled or unfinished piece, named
  std::string summary() const;     // one line for events and logs
};

// Checks the job's ranges and shard records: `total_steps` steps in epochs of `steps_per_epoch`
// (the last one shorter when the job stopped at a step limit), each over `shards` shards (0: the
// job has no shard ledger — a pipeline takes each step's batch from the seeded order by step, so
// the tiling of its steps is the whole proof). Errors
// only when the GCS cannot be read; a failed proof is a report with exactly_once false and the
// problems named.
Expected<AccountingReport> account_sync_job(Store& store, const JobId& job, int64_t total_steps,
                                            int64_t steps_per_epoch, int shards);

}  // namespace troupe::gcs
