// How a sync job's workers start after a restart (the job supervisor placed the gang again,
// actors/job_supervisor.h) and how they keep the data accounting of gcs/data_accounting.h.
//
//   1. Rank 0 picks the point to start from — the job's own newest intact checkpoint (a restart),
//      else the checkpoint of the job it resumes (`troupe submit --resume`), else the beginning —
//      and broadcasts it, so every replica loads the same one.
//   2. On a restart, rank 0 rewinds what the failed attempt did after that point — the shard
//      ledger's shards from the checkpoint's epoch on, the trained ranges after its step — and a
//      barrier keeps the others from claiming shards before it is done.
//   3. Rank 0 records each stretch of steps as it becomes durable (TrainedLog).
#pragma once

#include <optional>
#include <string>

#include "collectives/communicator.h"
#include "core/ids.h"
#include "gcs/store.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/checkpoint/collective_write.h"
#include "trainers/job/job_report.h"
#include "trainers/job/job_spec.h"

namespace troupe::job {

struct StartPoint {
  std::optional<checkpoint::TrainingState> state;  // none: from the first step
  std::optional<checkpoint::Manifest> manifest;    // the checkpoint state came from
  std::string source;                              // "job 1a2b3c4d step 300", for logs and the summary
  bool own = false;                                // the job's own checkpoint (a restart)
  // A live sharded job: go on from the buddy mirrors' round of this step (state holds only the step),
  // taken at this buddy distance.
  int64_t mirror_step = -1;
  int mirror_distance = 1;
  int mirror_world = 0;  // > 0: the rounds' group had this size or another numbering (re-cut)
};

// Which checkpoint a job starts from: kind 0 none (the first step), 1 the job's own newest intact
// one (a restart), 2 the one `troupe submit --resume` named.
struct StartChoice {
  int kind = 0;
  int64_t step = 0;
};

// Step 1's parts, for jobs whose members are not in one group (a pipeline: worker 0 chooses, the
// choice travels over the stage-0 group, then over each replica's pipe group): the choice, made by
// one member; passed from `comm`'s rank 0 to its other ranks (a collective); loaded whole, or only
// the slice [begin, end) of a `total`-parameter model (shard `hint` first: checkpoint::load_range).
Expected<StartChoice> choose_start(gcs::Store& store, const JobSpec& spec, const JobId& job);
Status broadcast_start_choice(collectives::Communicator& comm, StartChoice* choice, std::chrono::milliseconds timeout);
Expected<StartPoint> load_start(gcs::Store& store, const JobSpec& spec, const JobId& job, const StartChoice& choice);
Expected<StartPoint> load_start_range(gcs::Store& store, const JobSpec& spec, const JobId& job,
                                      const StartChoice& choice, size_t total, size_t begin, size_t end, int hint);

// Step 1, on every rank (a collective: all ranks call it). `step_only`: only the checkpoint's step
// and epoch in state, read from its first shard's header (checkpoint::read_position; params and
// optimizer empty): a sharded replica loads its own ranges from the manifest later, every shard it
// reads verified then, never the whole model, and the checkpoint is read once, not twice.
Expected<StartPoint> agree_start_point(gcs::Store& store, const JobSpec& spec, const JobId& job,
                                       collectives::Communicator& comm, std::chrono::milliseconds timeout,
                                       bool step_only = false);

// Step 1 for a job with one deciding member (a central job's server): the same choice, alone.
Expected<StartPoint> find_start_point(gcs::Store& store, const JobSpec& spec, const JobId& job);

// Step 2's work: the shard ledger (`shards` per epoch; 0: the job has none — a pipeline reads its
// batches by step) from the start point's epoch on and the trained ranges past its step go back,
// and an event "shards_moved" says so.
Status rewind_to(gcs::Store& store, const JobId& job, int shards, int64_t steps_per_epoch, const StartPoint& start);

// Step 2, on every rank of attempt `attempt` > 0 (a collective); rank 0 does the rewinding.
Status rewind_after_restart(gcs::Store& store, const JobId& job, int workers, int64_t steps_per_epoch,
                            const StartPoint& start, collectives::Communicator& comm,
                            std::chrono::milliseconds timeout);

// Steps 1 and 2 for a sync worker of attempt `attempt` (a collective): the agreed start point and,
// after a restart, the rewind (`shards` ledger shards per epoch).
Expected<StartPoint> start_sync_attempt(gcs::Store& store, const JobSpec& spec, const JobId& job, int attempt,
                                        int shards, int64_t steps_per_epoch, collectives::Communicator& comm,
                                        std::chrono::milliseconds timeout, bool step_only = false);

// Rank 0's summary of a sync job (CPU or GPU workers): the result (train_result_json) with the
// steps per epoch, the attempt, whether every step's ranges were recorded by this job (not one it
// resumed from: the supervisor then proves the data accounting), the strategy, the workers (the
// job's size: its ledger shards), the micro-batches per step and the job's id.
nlohmann::json sync_summary(const TrainResult& result, const JobSpec& spec, const JobId& job, int attempt,
                            int64_t steps_per_epoch, int workers);

// A sync job's summary fields of where it started and what it checkpointed: "resumed_from" (when
// it started from a checkpoint) and, with checkpoints, "checkpoint_every", "last_checkpoint_step"
// and "checkpoint_dir".
void add_start_and_checkpoints(nlohmann::json* summary, const JobSpec& spec, const JobId& job,
                               const StartPoint& start, int64_t last_checkpoint, const std::string& dir);

// The summary's "recovery": {"setting": live or checkpoint (how the job would recover)} and, for a
// job that restarted (gcs/job_recovery.h), how its last restart went on — mode live or checkpoint,
// from which step and rank, bytes moved, steps lost — and how many restarts it had.
void add_recovery(nlohmann::json* summary, gcs::Store& store, const JobId& job, const std::string& setting);

// Rank 0 of a restarted attempt, after its first step: records the event "job_resumed" (the end of
// the recovery that began with the supervisor's "job_restarting").
void note_resumed(gcs::Store& store, const JobId& job, int attempt, const std::string& source, int64_t step);

// Rank 0's progress callback: the reporter's record, and on a restarted attempt (attempt > 0) the
// job_resumed event at its first step. `reporter` must outlive the callback.
ProgressFn rank0_progress(gcs::Store& store, const JobId& job, int attempt, ProgressReporter& reporter,
                          std::string source, int64_t first_step);

// Step 3: rank 0's record of durable steps, from the start point's step on.
class TrainedLog {
 public:
  TrainedLog(gcs::Store& store, JobId job, int attempt, int64_t steps_per_epoch, int64_t first_step)
      : store_(store), job_(job), attempt_(attempt), steps_per_epoch_(steps_per_epoch), done_(first_step) {}
  // Every step up to global step `step` is durable: a checkpoint's shards are written and its
  // manifest is about to be committed (commit_trained_checkpoint), or the job is done.
  Status durable_through(int64_t step);
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

 private:
  gcs::Store& store_;
  JobId job_;
  int attempt_;
  int64_t steps_per_epoch_;
  int64_t done_;  // durable so far
};

// Rank 0's commit of checkpoint `m` once every shard of it is durable: its steps recorded as
// trained first, then the manifest (commit_checkpoint: mirrored on disk with those ranges and the
// finished epochs' ledger records, then in the GCS). A kill between the two leaves ranges past
// the newest checkpoint, which a restart's rewind drops; the other order could leave a checkpoint
// whose steps no range records, and the accounting a gap.
Status commit_trained_checkpoint(gcs::Store& store, const JobId& job, const JobSpec& spec, TrainedLog& trained,
                                 const checkpoint::Manifest& m);

// A sync job's replica's checkpoint settings (CPU: Replica, GPU: CudaReplica): every
// spec.checkpoint_every steps (0: none) under checkpoint_dir(spec, job), tagged with the job id;
// replica 0 commits with commit_trained_checkpoint and notes the step in *last.
checkpoint::ReplicaCheckpoints replica_checkpoints(gcs::Store& store, const JobId& job, const JobSpec& spec, int index,
                                       TrainedLog& trained, int64_t* last);


}  // namespace troupe::job
