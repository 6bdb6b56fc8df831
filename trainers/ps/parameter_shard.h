// One parameter-server shard: a contiguous range of a job's parameters (ps_partition.h), the
// optimizer state for that range, a version counter (updates applied) and a clock per worker
// (pushes received from it). Thread-safe: a server calls it from one thread per connection.
//
// Modes and their waiting rules (clock c = the step a worker is about to compute, 0-based; a
// worker's clock = the pushes it has made):
//
//   async    Stale-synchronous parallel. Every push is applied at once, on its own. A pull for
//            clock c waits until every live worker's clock is >= c - S, S = staleness bound:
//            S = 0 is a synchronous PS (lockstep, but updates are applied one by one), S = -1 is
//            fully asynchronous (never waits). The lead of a fast worker is therefore bounded:
//            it is never more than S steps ahead of the slowest live worker.
//   central  CentralStorageStrategy. The shard gathers clock c's pushes of all live workers, then
//            applies their average as one update (version c + 1); a pull for clock c waits until
//            version >= c. With every worker live this is synchronous data parallelism: the same
//            update as an all-reduce of the gradients. A finished worker is no longer waited for;
//            a removed one (it died) stops the shard: no update goes without its rows (a checkpoint
//            of the survivors' steps would hold a global batch the job never had, and lose the
//            dead worker's shards), and every pull fails unavailable naming it, so the job
//            restarts whole from its last checkpoint.
//
// Staleness of an applied update = shard version when it is applied minus the version the worker
// pulled before computing it (always 0 in central mode); every push records one in the histogram.
//
// Worker states:   live --finish_worker()--> finished
//                  live --remove_worker()--> removed  (died; its connection dropped)
//                  removed --rejoin_worker()--> live  (async: a replacement of the same rank)
//                  returning --rejoin_worker()--> live  (async: every worker of a restored shard)
// Neither finished, removed nor returning workers are waited for by pulls, and none of them may
// push; a final pull also waits for returning ones (they were training when the shard's
// predecessor died, and come back with replays). A finished worker may connect again (a
// connection that broke while it waited for the others): it stays finished, and finishing again is
// no error. A pull that waits longer than wait_timeout fails with timeout naming the slowest
// worker and its clock.
// shut_down() wakes every waiter with unavailable.
//
// Checkpoints (trainers/checkpoint/): with enable_checkpoints, the shard writes its range and
// optimizer state to a shard file each time its version reaches a multiple of `every`, inside the
// update, under the shard's lock (no pull sees version v before the shard file of v is durable).
//   central  version = the job's step (every update is global): every shard checkpoints the same
//            step, and the workers wait for it.
//   async    version = pushes applied. Every worker pushes every clock to every shard, so every
//            shard passes every version: version v is common to all shards (each has applied v
//            updates), though not the same v updates (arrival order differs per shard; bounded by
//            the staleness bound, like async itself). A version whose shard file already exists (a
//            failed predecessor of this shard wrote it) is not written again.
// An async shard file also holds the shard's applied-data record (applied_data.h), taken under the
// same lock as the parameters.
// restore() starts a shard from a checkpoint: central: version and every worker's clock = its
// step. async (a replacement of a failed server, the other shards still running): version = its
// step, the applied-data record the checkpoint's, every worker removed until it connects again; a
// reconnecting worker says its own clock (rejoin_worker), so the shard goes on from the workers'
// clocks, not the checkpoint's; an async pull for clock c also raises the worker's clock to c (it
// pushed c times), so a replacement worker that never reached it before is not held up. The pushes
// the shard lost (those after the record's last push of each rank) come back as replays: each
// worker recomputes them on its current parameters and replays them, in order, before anything
// else it sends (ps_client.h); a replay is applied and recorded but moves no clock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/optim/lr_schedule.h"
#include "trainers/optim/optimizer.h"
#include "trainers/ps/applied_data.h"
#include "trainers/ps/ps_partition.h"
#include "trainers/ps/push_history.h"
#include "trainers/ps/staleness.h"
#include "trainers/setup/train_options.h"

namespace troupe::ps {

enum class PsMode : uint8_t { async = 1, central = 2 };
const char* mode_name(PsMode mode);                   // "async", "central"
bool parse_ps_mode(const std::string& text, PsMode* out);

struct ShardOptions {
  PsMode mode = PsMode::async;
  int workers = 1;
  int64_t staleness = -1;              // async: the bound S; -1 unbounded, 0 synchronous
  OptimizerOptions optimizer;          // the same as the sync path's
  LrSchedule schedule = LrSchedule::constant;
  int64_t total_updates = 0;           // the schedule's length in updates this shard will apply
  int64_t warmup_steps = 0;
  std::chrono::milliseconds wait_timeout{30000};  // the longest a pull waits for other workers
  int shards = 1;                      // the job's shard count and parameter count, told to
  size_t total_floats = 0;             //   clients so they can check the partition (0: range end)
  // central, one shard (the whole model): the averaged gradient clipped to this L2 norm before it
  // is applied (--clip-grad-norm; 0: none). Async workers clip each push themselves (worker_loop).
  float clip_grad_norm = 0;
};

// The options of every shard of a job trained with `options` by `workers` workers, each taking
// global batch / workers rows per step for `steps_per_epoch` steps an epoch (train rows / global
// batch). The schedule runs over the updates the shard will apply: workers x steps (async) or
// steps (central). --clip-grad-norm is the central shard's (above); --weight-decay-params matrices
// needs the shard's decay ranges, which make_job_shard fills (ps_job.h). invalid_argument for a bad
// optimizer or schedule.
Expected<ShardOptions> shard_options(const TrainOptions& options, PsMode mode, int workers, int64_t staleness,
                                     int64_t steps_per_epoch);

// What a shard needs to checkpoint (see above).
struct ShardCheckpointing {
  int64_t every = 0;              // versions between checkpoints
  std::string dir;                // checkpoint::step_dir(dir, version) gets the shard file
  std::string tag;                // the job id, into every shard header
  int64_t steps_per_epoch = 0;    // versions an epoch: to record the epoch and the versions of it done
  // Called (under the shard's lock) once the shard file of `version` is durable; an error, or a
  // failed write, shuts the shard down with the reason (the workers then fail naming it).
  std::function<Status(const checkpoint::WrittenShard&, int64_t version)> written;
};

class ParameterShard {
 public:
  // Shard `index` holding `range`, starting from `initial` (range.size() floats, the caller's
  // slice of init_parameters with the job's seed). invalid_argument for bad options or sizes.
  static Expected<std::unique_ptr<ParameterShard>> create(int index, ShardRange range, std::vector<float> initial,
                                                          const ShardOptions& options);

  // Worker `worker`'s parameters for clock `clock`: waits as the mode says, then copies the range
  // into out[0, range.size()) and returns the version they are. Errors: timeout (naming the
  // slowest worker), invalid_argument (an unknown or departed worker), unavailable (shut down).
  Expected<int64_t> pull(int worker, int64_t clock, float* out);
  // The parameters once every worker has finished or been removed (and central mode applied its
  // last update): what a job reports as its result.
  Expected<int64_t> pull_final(float* out);
  // Worker `worker`'s gradient for clock `clock` (range.size() floats), computed from the
  // parameters of `version_pulled` on the batch `tag` says (recorded: applied_data.h). Returns the
  // shard's version after it. Errors: invalid_argument for a clock pushed twice, a version from the
  // future, or a departed worker.
  Expected<int64_t> push(int worker, int64_t clock, const float* grads, int64_t version_pulled,
                         const DataTag& tag = {});
  // Async: worker `worker`'s push of clock `clock`, which this restored shard lost, again (see
  // above). invalid_argument unless the worker is live, the shard async, and last applied push of
  // the worker < clock < the worker's clock. Returns the shard's version after it.
  Expected<int64_t> replay(int worker, int64_t clock, const float* grads, const DataTag& tag);
  // Async, before any worker connected, in a job resumed from another job's checkpoint
  // (trainers/job/ps_resume.h): the old job's workers are forgotten (forget_workers), and this
  // shard's gradient for examples the other shards of the checkpoint had applied and it had not is
  // applied and recorded (catch_up: range.size() floats). Returns the version after it.
  void forget_workers();
  Expected<int64_t> catch_up(const float* grads, const DataTag& tag);

  // Before any worker pulled: checkpoints as ShardCheckpointing says. invalid_argument for
  // every < 1 or an empty dir.
  Status enable_checkpoints(ShardCheckpointing options);
  // Before any worker pulled: this shard's range of `state` (a whole checkpoint of the job), its
  // optimizer state, version = state.step; central: every clock = state.step; async: every worker
  // removed at clock 0 until it rejoins (see above). invalid_argument when the checkpoint holds
  // another number of parameters or another optimizer.
  Status restore(const checkpoint::TrainingState& state);

  Status finish_worker(int worker);                // the worker trained its last step
  void remove_worker(int worker, const std::string& why);  // the worker is gone
  // Worker `worker` connects: a live one (its first connection) or, in async mode, a removed one
  // again: a replacement of a failed worker (reported_clock 0: it goes on from its predecessor's
  // clock) or a worker reconnecting to a restored shard (reported_clock = its own clock). Async:
  // the worker's clock becomes max(the shard's, reported_clock). Returns the worker's clock.
  // invalid_argument for a finished worker, or a removed one in central mode (a central job
  // restarts whole, with new servers).
  Expected<int64_t> rejoin_worker(int worker, int64_t reported_clock = 0);
  void shut_down(const std::string& why);          // every waiting and later call fails

  int index() const { return index_; }
  const ShardRange& range() const { return range_; }
  const ShardOptions& options() const { return options_; }
  int64_t version() const;
  StalenessHistogram staleness() const;
  // Worker `worker`'s clock and the tag of its last applied push (a default one for a bad rank).
  WorkerPosition position(int worker) const;
  std::vector<AppliedShard> applied() const;       // applied_data.h, since this shard started
  // Async, with checkpoints: worker `worker`'s applied pushes after clock `after` (push_history.h),
  // for a replacement whose predecessor's pushes a restored shard lost.
  PushesAfter pushes_after(int worker, int64_t after) const;
  int64_t restored_step() const;                   // the checkpoint's step restore() took; -1: none
  bool restored_record() const;                    // restore() found the applied-data record in it
  int64_t replayed() const;                        // replays applied
  bool all_finished() const;                       // every worker said finish
  // `f` runs once, under the shard's lock, when the last worker said finish (central mode: after
  // the last update was applied), with the shard's version then: before any final pull returns.
  // Set it before the shard serves.
  void on_all_finished(std::function<void(int64_t version)> f);
  std::vector<float> parameters() const;
  std::string describe() const;                    // "shard 1 (async, S=4) floats [117573, 235146)"

 private:
  enum class WorkerState : uint8_t { live, finished, removed, returning };
  ParameterShard(int index, ShardRange range, std::vector<float> initial, const ShardOptions& options,
                 std::unique_ptr<Optimizer> optimizer);
  Status check_worker(int worker, const char* what) const;  // needs mu_
  bool may_pull(int64_t clock) const;                       // needs mu_
  std::string waiting_for(int worker, int64_t clock) const; // needs mu_: the timeout's text
  void apply(const float* grads);                           // needs mu_
  void apply_central_if_complete();                         // needs mu_
  void checkpoint_if_due();                                 // needs mu_
  std::string unfinished() const;                           // needs mu_: "1, 3 (not back since the restore)"

  const int index_;
  const ShardRange range_;
  const ShardOptions options_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<float> params_;
  std::unique_ptr<Optimizer> optimizer_;
  int64_t version_ = 0;
  std::vector<int64_t> clocks_;       // pushes per worker
  std::vector<WorkerState> states_;
  std::vector<float> sum_;            // central: the gathered gradients of clock version_
  int contributions_ = 0;             // central: pushes in sum_
  StalenessHistogram staleness_;
  AppliedData applied_;
  PushHistory history_;               // kept with checkpoints (async): see pushes_after
  int64_t restored_step_ = -1;
  bool restored_record_ = false;
  int64_t replayed_ = 0;
  std::string shut_down_;             // non-empty once shut down: why
  std::string lost_;                  // central: non-empty once a worker was removed: which, and why
  ShardCheckpointing checkpointing_;  // every == 0: none
  std::function<void(int64_t)> on_all_finished_;  // run once; empty after
};

}  // namespace troupe::ps
