// An async job resumed from another job's checkpoint (`troupe submit --resume JOB`, after a
// whole-cluster restart), kept exactly-once (gcs/async_accounting.h):
//
//   1. Every server restores its range of the checkpoint and its shard's applied-data record
//      (trainers/ps/applied_data.h). The old job's servers wrote their files at one version each,
//      but not after the same pushes (arrival order differs; the pushes in flight): the records
//      differ by a few batches. The job goes on from the most any server applied of each (epoch,
//      ledger shard) (resumed_data).
//   2. Each server catches up: the examples another server had applied and it had not are
//      gathered from the epochs' plans, their gradient computed on the checkpoint's parameters,
//      and applied to its range alone (catch_up_shard). Every server then holds every example of
//      the checkpoint once. The old job's workers are forgotten (the new ones start at clock 0).
//   3. Server 0 records the new job's ledger from that (seed_ledger): shards trained whole DONE,
//      the others to be claimed from where the training stopped. It does so before it publishes
//      its address, and the workers wait for every address, so nobody claims before.
//   4. Workers start at the first epoch with examples left (first_open_epoch).
// A server of a resumed job that fails before the job's first own checkpoint is restored the same
// way, and the workers replay to it everything they pushed (ps_client.h).
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/store.h"
#include "trainers/checkpoint/checkpoint.h"
#include "data/shards/shard_plan.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/ps/parameter_shard.h"
#include "trainers/setup/train_options.h"

namespace troupe::job {

struct ResumedData {
  std::map<std::pair<int, int>, int64_t> applied;  // (epoch, ledger shard) -> examples, from 0
  int last_epoch = 0;                              // the highest epoch with any
};

// Step 1 from the checkpoint's `servers` applied-data records (its extras). invalid_argument when
// the checkpoint has another number of servers or another number of workers (resume with the old
// job's --workers and --ps); corrupt_data when a record is missing or malformed.
Expected<ResumedData> resumed_data(const checkpoint::TrainingState& state, int servers, int workers);

// Step 2 for server `index`, its shard restored from `state` (so it holds its own record): returns
// the batches caught up. The trainer is built from `options` (rank 0 of `workers`), batches have
// at most `batch_rows` rows.
Expected<int64_t> catch_up_shard(ps::ParameterShard& shard, int index, const checkpoint::TrainingState& state,
                                 const ResumedData& data, const TrainOptions& options, const Dataset& train,
                                 const data::ShardPlanOptions& plan, int workers, int64_t batch_rows);

// Step 3: epochs 1 .. data.last_epoch of `job`'s ledger (`plan.shards` shards each).
Status seed_ledger(gcs::Store& store, const JobId& job, const ResumedData& data, const Dataset& train,
                   const data::ShardPlanOptions& plan);

// Step 4: the first of epochs 1 .. `epochs` the ledger does not have DONE whole (an epoch not
// recorded yet counts as open); `epochs` when every one is.
Expected<int> first_open_epoch(gcs::Store& store, const JobId& job, int shards, int epochs);

}  // namespace troupe::job
