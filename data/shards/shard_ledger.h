// The shard ledger: who holds which shard of a job's epoch, and how far they got, as ShardRecords
// in the GCS (the state machine is drawn in gcs/records.h). The job supervisor creates each epoch's
// shards; workers claim them one at a time, report progress and complete them; when a worker dies
// the supervisor (the fault-tolerance path) releases its unfinished shards for others to claim.
//
// Every change is a read, an edit and a Store::compare_and_set of the whole record: a change made
// by someone else in between makes the write fail, and the ledger reads again and decides again.
// So two workers racing for a shard — threads of one process or processes on different hosts —
// never both get it, and a late report of a worker that was released cannot overwrite the record
// of the shard's new owner. Each successful write publishes the record's key on the "shards"
// channel, like gcs::Table::put, for watchers (the supervisor, the dashboard).
//
// A released shard is restarted from its first example by whoever claims it next (claim resets
// progress to 0; release keeps the old progress in the record until then, for status output). Why
// not resume from the reported progress: a worker reports examples it has stepped over, but when
// it dies mid-step the gradients of its last steps may never have been applied, so resuming could
// skip examples; restarting repeats at most one shard's worth of them. An async job knows better:
// its parameter servers record which examples' gradients they applied (trainers/ps/applied_data.h),
// so a replacement releases its predecessor's shards with resume offsets from them, and the next
// claim starts there (ShardRecord::resume_at): nothing skipped, nothing applied twice.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/records.h"
#include "gcs/store.h"

namespace troupe::data {

struct ShardLedgerOptions {
  int shards = 1;  // shards per epoch: the plan's ShardPlanOptions::shards
  // The most one call spends re-reading and retrying after losing races to other writers (each
  // store call is bounded by the store's own deadline on top).
  std::chrono::milliseconds timeout{5000};
};

class ShardLedger {
 public:
  // `store` must outlive the ledger. Thread-safe when the store is (both stores are).
  ShardLedger(gcs::Store& store, JobId job, ShardLedgerOptions options);

  // ---- the job supervisor ----
  // Records shards 0 .. S-1 of `epoch` as UNASSIGNED with sizes[s] examples. Idempotent: a shard
  // already recorded (a supervisor that restarted) is left untouched, progress and owner included.
  // invalid_argument when sizes has not S entries or one is negative.
  Status create_epoch(int epoch, const std::vector<int64_t>& sizes);
  // The same for a job resumed from another job's checkpoint: trained[s] examples of shard s were
  // trained before (0 .. sizes[s]): a shard trained whole is recorded DONE (owner nil), one trained
  // in part UNASSIGNED with resume_at = trained[s] (the next claim starts there). Idempotent like
  // create_epoch. invalid_argument as create_epoch, or for trained outside [0, size].
  Status create_resumed_epoch(int epoch, const std::vector<int64_t>& sizes, const std::vector<int64_t>& trained);

  // Returns every ASSIGNED shard of `worker`, in any epoch of the job, to UNASSIGNED (owner nil,
  // progress kept until the next claim), and the records as they are now. A worker holding
  // nothing is not an error (empty list). resume_at(record) (if given) says where the next claim
  // of each starts (its examples before were applied); without, from 0. invalid_argument when it
  // gives an offset outside [0, examples] (nothing is released after that one).
  using ResumeAt = std::function<int64_t(const gcs::ShardRecord&)>;
  Expected<std::vector<gcs::ShardRecord>> release_worker(WorkerId worker, const ResumeAt& resume_at = {});
  // DONE by `owner` -> UNASSIGNED (owner nil) with resume_at = `at`: an async job whose every
  // parameter server came back from a checkpoint, its worker lost with them, lost the gradients of
  // what that worker trained since, shards it completed included; they are trained again from `at`.
  // Returns false (nothing changed) when the shard is not DONE by `owner`. invalid_argument for `at`
  // outside [0, examples); not_found when the epoch or shard was not created.
  Expected<bool> reopen(int epoch, int shard, WorkerId owner, int64_t at);

  // Returns every shard of epochs >= `from_epoch` that is ASSIGNED or DONE to UNASSIGNED (owner
  // nil): a restarted sync job rolled its parameters back to a checkpoint taken in `from_epoch`,
  // so what was trained since is trained again. Returns how many shards were reset.
  Expected<int> rewind(int from_epoch);

  // ---- a worker ----
  // Takes the lowest-numbered UNASSIGNED shard of `epoch` for `worker` (first come: an async
  // worker): ASSIGNED, owner = worker, progress = resume_at (0 unless released with an offset),
  // claims + 1; returns the record as written. nullopt when no shard is UNASSIGNED (the epoch is
  // done, or what is left is held by others). not_found when the epoch was not
  // created; timeout when other writers kept winning for options.timeout.
  Expected<std::optional<gcs::ShardRecord>> claim(int epoch, WorkerId worker);
  // Takes shard `shard` of `epoch` by name (a lockstep worker's own shard: sync rank r trains the
  // shards r, r + N, ..., whichever worker gets to the ledger first): UNASSIGNED -> ASSIGNED as
  // claim does. One still ASSIGNED is taken over the same way (its holder is an earlier attempt's
  // worker that was not released — central workers keep their id across attempts —: it starts
  // again at resume_at and a stale holder's late reports are refused). nullopt when the shard is
  // DONE (nothing left of it). not_found when the epoch or shard was not created; timeout as claim.
  Expected<std::optional<gcs::ShardRecord>> claim_shard(int epoch, int shard, WorkerId worker);

  // Records that `worker` is done with the first `examples_done` examples of its shard. Two round
  // trips: report every few batches, not every one. not_found when the worker does not hold the
  // shard (it was released, or never claimed): drop the shard and claim another.
  // invalid_argument when examples_done is outside [0, examples].
  Status report_progress(int epoch, int shard, WorkerId worker, int64_t examples_done);

  // ASSIGNED -> DONE with progress = examples. Completing a shard the worker already completed is
  // ok (a retry); not_found as for report_progress.
  Status complete(int epoch, int shard, WorkerId worker);

  // ---- anyone ----
  // The epoch's records ordered by shard; not_found when the epoch was not created.
  Expected<std::vector<gcs::ShardRecord>> epoch_status(int epoch);
  // true when every shard of the epoch is DONE; not_found when the epoch was not created.
  Expected<bool> epoch_done(int epoch);

  const JobId& job() const { return job_; }

 private:
  struct Read {
    gcs::ShardRecord record;
    std::string bytes;  // what compare_and_set must find
  };
  std::string key(int epoch, int shard) const;
  std::string where(int epoch, int shard) const;  // "shard 3 of epoch 2 of job 1a2b3c4d"
  Expected<std::optional<Read>> read(int epoch, int shard);
  // compare_and_set of `next` (its updated_ms set to now) over `current`; false: someone else
  // changed the record first.
  Expected<bool> swap(const Read& current, gcs::ShardRecord& next);
  // Reads the shard, lets `edit` change the record (or refuse with an error; false: no change
  // needed) and writes it back, again from a fresh read after each lost race, until the deadline.
  // `written`, when given, receives the record as stored (its updated_ms too) after a write.
  template <class Edit>
  Status modify(int epoch, int shard, Edit&& edit, gcs::ShardRecord* written = nullptr);

  gcs::Store& store_;
  JobId job_;
  ShardLedgerOptions options_;
};

}  // namespace troupe::data
