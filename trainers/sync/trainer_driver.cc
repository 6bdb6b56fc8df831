#include "trainers/sync/trainer_driver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include <spdlog/spdlog.h>

#include "collectives/lost_peer.h"
#include "kernels/cpu/blas_info.h"
#include "kernels/cpu/denormals.h"
#include "kernels/cpu/ops.h"
#include "trainers/report/epoch_report.h"
#include "trainers/local/local_trainer.h"
#include "trainers/setup/model_file.h"
#include "trainers/optim/loss_scale.h"
#include "trainers/optim/lr_schedule.h"
#include "trainers/optim/param_init.h"
#include "trainers/sync/gradient_sync.h"
#include "trainers/sync/padding_row.h"
#include "trainers/sync/replica_checks.h"
#include "trainers/sync/replica_results.h"
#include "trainers/sync/replica_state.h"
#include "trainers/sync/step_rows.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe {
namespace {

using Clock = std::chrono::steady_clock;

// One replica's run once its parts are made: the epochs, each of steps that draw a batch
// (StepRows decides its rows and weight; PaddingRow stands in for none), compute and synchronise
// the gradients (GradientSync), update the state (ReplicaState), then check and checkpoint
// (replica_checks.h), score and report (replica_results.h, epoch_report.h).
class ReplicaLoop {
 public:
  ReplicaLoop(const TrainOptions& o, const Dataset& train, const Dataset& test, const Replica& replica,
              const ProgressFn& progress, TrainerSetup& setup, const StepRows& rows, ReplicaState& state,
              GradientSync& sync, BatchFeed& feed, BuddyMirror* mirror)
      : o_(o), train_(train), test_(test), replica_(replica), progress_(progress), setup_(setup), rows_(rows),
        state_(state), sync_(sync), feed_(feed), mirror_(mirror), padding_(train.spec()), scaled_(o.precision == DType::f16),
        scaler_(o.loss_scale_options()) {
    parse_lr_schedule(o.lr_schedule, &schedule_);  // validated by TrainOptions::validate
  }

  // Every epoch from `start` on; the result's history, timings and loss-scale counts filled.
  // A lost peer's run leaves, for live recovery (Replica::held), the state kept where the step failed
  // or, sharded, the buddy mirror's rounds.
  Status run(const ReplicaState::Start& start, TrainResult* result);
  int64_t steps_done() const { return step_; }
  double train_seconds() const { return train_seconds_; }

 private:
  Status run_epochs(TrainResult* result);
  Status run_epoch(int epoch, TrainResult* result);
  // The epoch's end: scored on the test split (when due) and reported. A peer lost in the scoring
  // (live recovery) leaves the state kept as of the epoch's end, to be scored again after it.
  Status end_epoch(int epoch, const EpochTally& tally, double epoch_seconds, TrainResult* result);
  enum class Step { trained, skipped, epoch_ended };
  // Step s of `epoch`: trained, skipped (done before the checkpoint this run resumed from), or the
  // epoch ended before it (a lone replica's feed ran out).
  Expected<Step> run_step(int epoch, int64_t s, EpochTally& tally);
  // The batch of step s (or the padding row), its rows in *rows; false: the epoch ends.
  Expected<bool> draw(int epoch, int64_t s, Batch* batch, int64_t* rows);
  // Live recovery (Replica::held, if set; unsharded): the state as of global step `step`,
  // `epoch_step` steps into `epoch`, kept for the job layer before a lost peer's error is returned.
  void keep_state(int64_t step, int epoch, int64_t epoch_step);
  // The update after the reduction: f16's overflow check and scale, the rate of the schedule.
  Status apply(int epoch, int64_t s);
  std::string at_step(int epoch, int64_t s) const {
    return " at epoch " + std::to_string(epoch) + ", step " + std::to_string(s + 1);
  }

  const TrainOptions& o_;
  const Dataset& train_;
  const Dataset& test_;
  const Replica& replica_;
  const ProgressFn& progress_;
  TrainerSetup& setup_;
  const StepRows& rows_;
  ReplicaState& state_;
  GradientSync& sync_;
  BatchFeed& feed_;
  BuddyMirror* const mirror_;  // sharded live recovery (trainers/sharded/buddy_mirror.h), or null
  PaddingRow padding_;
  const bool scaled_;  // f16: dynamic loss scaling (trainers/optim/loss_scale.h)
  LossScaler scaler_;
  LrSchedule schedule_ = LrSchedule::constant;
  int first_epoch_ = 1;
  int64_t skip_steps_ = 0;
  Clock::time_point skip_started_;  // when the pass over them began
  int64_t step_ = 0;  // steps done
  bool stop_ = false;
  bool counted_ = true;  // the trainer reports correct predictions
  double train_seconds_ = 0;
};

Status ReplicaLoop::run(const ReplicaState::Start& start, TrainResult* result) {
  step_ = start.step;
  first_epoch_ = start.first_epoch;
  skip_steps_ = start.skip_steps;
  stop_ = o_.max_steps > 0 && step_ >= o_.max_steps;
  Status st = run_epochs(result);
  if (!st.ok() && mirror_ && collectives::lost_peer(st)) hold_mirror(mirror_->release(), replica_.held);
  return st;
}

Status ReplicaLoop::run_epochs(TrainResult* result) {
  if (mirror_)  // the first round: the start itself
    TROUPE_RETURN_IF_ERROR(mirror_->after_step(state_.params(), step_, first_epoch_, skip_steps_));
  // Resumed exactly at an epoch's end (live recovery after a peer was lost while that epoch was
  // scored, or a checkpoint of its last step): that epoch's score first, which may be the job's last.
  if (step_ > 0 && skip_steps_ == 0 && first_epoch_ > 1)
    TROUPE_RETURN_IF_ERROR(end_epoch(first_epoch_ - 1, EpochTally{}, 0.0, result));
  for (int epoch = first_epoch_; epoch <= o_.epochs && !stop_; ++epoch) TROUPE_RETURN_IF_ERROR(run_epoch(epoch, result));
  if (scaled_) {
    result->overflow_steps = scaler_.skipped();
    result->loss_scale = scaler_.scale();
  }
  return {};
}

Status ReplicaLoop::run_epoch(int epoch, TrainResult* result) {
  const auto epoch_start = Clock::now();
  const std::string data_of = "data of epoch " + std::to_string(epoch);
  // The steps done before this start, read for nothing; the step whose row pads the short last one
  // (StepRows::keeps_padding) is read whole.
  if (epoch == first_epoch_ && skip_steps_ > 0) {
    skip_started_ = Clock::now();
    feed_.pass_over(rows_.short_last ? std::min(skip_steps_, rows_.steps_per_epoch - 2) : skip_steps_);
  }
  TROUPE_RETURN_IF_ERROR(feed_.begin_epoch(epoch).with_context(data_of));
  EpochTally tally;
  for (int64_t s = 0; s < rows_.steps_per_epoch && !stop_; ++s) {
    auto done = run_step(epoch, s, tally);
    if (!done.ok()) return done.status();
    if (*done == Step::epoch_ended) break;
    if (*done == Step::skipped) continue;
    if (progress_)
      progress_(step_progress(o_, epoch, rows_.steps_per_epoch, tally, seconds_since(epoch_start),
                              rows_.total_steps - step_));
    if (o_.max_steps > 0 && step_ >= o_.max_steps) stop_ = true;
  }
  TROUPE_RETURN_IF_ERROR(feed_.end_epoch().with_context(data_of));
  const double epoch_seconds = seconds_since(epoch_start);
  train_seconds_ += epoch_seconds;
  return end_epoch(epoch, tally, epoch_seconds, result);
}

Status ReplicaLoop::end_epoch(int epoch, const EpochTally& tally, double epoch_seconds, TrainResult* result) {
  EpochStats es = epoch_stats(epoch, tally, o_.batch_size, epoch_seconds);
  if (!counted_) es.train_accuracy = -1;
  if (o_.evaluate_each_epoch || epoch == o_.epochs || stop_) {
    auto score = score_replicas(*setup_.trainer, sync_, test_, replica_);
    if (!score.ok()) {
      Status failed = score.status().with_context(setup_.where + ": evaluate after epoch " + std::to_string(epoch));
      if (failed.code() != Code::internal && (o_.max_steps <= 0 || step_ < o_.max_steps))
        keep_state(step_, epoch, rows_.steps_per_epoch);
      return failed;
    }
    es.test_accuracy = score->accuracy;
    es.test_loss = score->loss;
  }
  report_epoch(es, o_, rows_.steps_per_epoch, result, progress_);
  return {};
}

Expected<bool> ReplicaLoop::draw(int epoch, int64_t s, Batch* batch, int64_t* rows) {
  auto more = feed_.next(batch);
  if (!more.ok()) return more.status().with_context("data of epoch " + std::to_string(epoch));
  auto takes = rows_.accept(*more, *more ? batch->size : 0, s, epoch);
  if (!takes.ok() || !*takes) return takes;
  *rows = *more ? batch->size : 0;
  if (!*more) {
    if (padding_.empty()) return internal_error("no row kept to pad the short last step of epoch " + std::to_string(epoch));
    *batch = padding_.batch();
  } else if (rows_.keeps_padding(s)) {  // a row for a replica that gets none next
    padding_.keep(*batch);
  }
  return true;
}

Expected<ReplicaLoop::Step> ReplicaLoop::run_step(int epoch, int64_t s, EpochTally& tally) {
  if (replica_.cancel && replica_.cancel->load())
    return unavailable("stopped at epoch " + std::to_string(epoch) + ", step " + std::to_string(s + 1));
  StepRecorder* const steps = replica_.steps;  // the step timeline, if kept
  const size_t payload = replica_.comm ? replica_.comm->payload_bytes() : 0;
  if (steps) steps->begin(epoch, step_ + 1, payload);  // data wait
  Batch batch;
  int64_t rows = 0;
  auto drawn = draw(epoch, s, &batch, &rows);
  if (!drawn.ok()) return drawn.status();
  if (!*drawn) {
    if (steps) steps->abandon();
    return Step::epoch_ended;
  }
  if (epoch == first_epoch_ && s < skip_steps_) {  // trained before the state this run started from
    TROUPE_RETURN_IF_ERROR(feed_.trained().with_context("data of epoch " + std::to_string(epoch)));
    if (s + 1 == skip_steps_)
      spdlog::info("{}: the {} steps of epoch {} done before this start passed over in {:.0f} ms", setup_.where,
                   skip_steps_, epoch, 1000 * seconds_since(skip_started_));
    return Step::skipped;
  }
  if (steps) steps->phase(StepPhase::forward_backward);
  state_.zero_grads();
  const float weight = rows_.weight_at(s, rows);
  batch.features = train_.features();
  batch.loss_scale = scaled_ ? scaler_.scale() : 1.0f;
  auto stats = sync_.forward_backward(batch, weight, epoch, s, o_.accumulate);
  if (!stats.ok()) return stats.status().with_context(setup_.where + ": forward_backward" + at_step(epoch, s));
  ++step_;
  if (steps) steps->phase(StepPhase::communication);
  Status reduced = sync_.reduce(&*stats, rows);
  if (!reduced.ok()) {
    reduced = reduced.with_context(setup_.where + ": all-reducing gradients" + at_step(epoch, s));
    keep_state(step_ - 1, epoch, s);  // nothing of this step applied: the state is step_ - 1's
    return reduced;
  }
  if (step_ % o_.loss_check_every == 0 && !std::isfinite(stats->loss))
    return nonfinite_loss(stats->loss, epoch, s + 1, rows_.steps_per_epoch, step_, state_.optimizer_settings().lr);
  if (steps) steps->phase(StepPhase::optimizer);
  TROUPE_RETURN_IF_ERROR(apply(epoch, s));
  TROUPE_RETURN_IF_ERROR(feed_.trained().with_context("data of epoch " + std::to_string(epoch)));
  if (replica_.steps_done) *replica_.steps_done = step_;
  if (steps) steps->end(rows, stats->loss, sync_.comm_seconds(), replica_.comm ? replica_.comm->payload_bytes() : 0);
  if (stats->correct < 0) counted_ = false;
  tally.add(stats->loss, std::max<int64_t>(stats->correct, 0), rows_.examples_at(s));
  Status checked = after_step_checks(state_, replica_, setup_.space.size(), step_, epoch, s + 1, setup_.where);
  // A peer lost in the checksum's or the checkpoint's collective: this step is applied on every
  // replica (its all-reduce completed), so the state kept is this step's. (Diverged replicas,
  // internal, are not a loss to recover from.)
  if (!checked.ok() && checked.code() != Code::internal) keep_state(step_, epoch, s + 1);
  TROUPE_RETURN_IF_ERROR(checked);
  if (mirror_) TROUPE_RETURN_IF_ERROR(mirror_->after_step(state_.params(), step_, epoch, s + 1));
  return Step::trained;
}

void ReplicaLoop::keep_state(int64_t step, int epoch, int64_t epoch_step) {
  if (!replica_.held || state_.sharded()) return;  // sharded: the mirror's rounds (run)
  Status kept = hold_state(state_, step, epoch, epoch_step, replica_.held);
  if (!kept.ok()) spdlog::warn("{}: keeping the state for live recovery: {}", setup_.where, kept.to_string());
}

// f16: the gradients (all-reduced: every replica decides alike) carry the loss scale; an overflow
// skips the update, else the scale is divided out.
Status ReplicaLoop::apply(int epoch, int64_t s) {
  const float used_scale = scaler_.scale();
  const std::string at = at_step(epoch, s);
  Expected<bool> finite = true;
  if (scaled_) finite = state_.grads_finite();
  if (!finite.ok()) return finite.status().with_context(setup_.where + at);
  auto go = scaled_ ? scaler_.update(*finite) : Expected<bool>(true);
  if (!go.ok()) return go.status().with_context(setup_.where + at);
  if (!*go) return {};
  const float lr = scheduled_lr(schedule_, state_.optimizer_settings().lr, step_ - 1, rows_.total_steps, o_.warmup_steps);
  return state_.update(lr, scaled_ ? 1.0f / used_scale : 1.0f, o_.clip_grad_norm, at);
}

// The end of a run: the parameters finite, the result's totals and timings.
Status finish_replica(const TrainOptions& o, const Replica& replica, ReplicaState& state, const ReplicaLoop& loop,
                      bool whole, TrainResult* result) {
  auto finite = state.finish(whole);
  if (!finite.ok()) return finite.status();
  if (!*finite)
    return numeric_error("parameters are not finite after training; lower --lr (" +
                         std::to_string(state.optimizer_settings().lr) + ")");
  const int64_t step = loop.steps_done();
  finish_result(result, step, o.batch_size, loop.train_seconds());
  if (replica.resume && loop.train_seconds() > 0)  // the throughput of the steps this run trained
    result->samples_per_second = static_cast<double>(step - replica.resume->step) * o.batch_size / loop.train_seconds();
  return {};
}

// --save of the trained model, its metadata from the run.
Status save_trained(const TrainOptions& o, const Dataset& train, const Replica& replica, const TrainerSetup& setup,
                    ReplicaState& state, int64_t step, bool whole, const TrainResult& result) {
  const int rank = replica.comm ? replica.comm->rank() : 0;
  const int epochs_done = result.history.empty() ? 0 : result.history.back().epoch;
  auto metadata =
      model_metadata(o, train.spec(), train.normalization, setup.model, step, epochs_done, result.test_accuracy);
  TROUPE_RETURN_IF_ERROR(save_replica_model(state, setup.space, o.save_path, o.save_dtype, metadata, rank, whole)
                             .with_context("--save"));
  if (rank == 0) spdlog::info("model written to {}", o.save_path);
  return {};
}

}  // namespace

void init_parameters(const ParameterSpace& space, uint64_t seed, float* params) {
  init_parameter_range(space, seed, 0, space.size(), params);
}

Expected<JobConfig> trainer_config(const TrainOptions& o) {
  auto config = JobConfig::parse(o.trainer_args);
  if (!config.ok()) return config.status().with_context("--trainer-arg");
  auto runtime = JobConfig::parse(o.runtime_args);
  if (!runtime.ok()) return runtime.status().with_context("the runtime's trainer settings");
  for (const auto& [key, value] : runtime->values()) config->set(key, value);
  if (!config->has("hidden")) {
    std::string hidden;
    for (int h : o.hidden) hidden += (hidden.empty() ? "" : ",") + std::to_string(h);
    config->set("hidden", hidden);
  }
  return config;
}

Expected<TrainResult> train_with_trainer(const TrainOptions& o, const Dataset& train, const Dataset& test,
                                         const ProgressFn& progress, std::vector<float>* final_params) {
  return train_replica(o, train, test, Replica{}, progress, final_params);
}

Expected<TrainResult> train_replica(const TrainOptions& o, const Dataset& train, const Dataset& test,
                                    const Replica& replica, const ProgressFn& progress,
                                    std::vector<float>* final_params) {
  TROUPE_RETURN_IF_ERROR(o.validate());
  const int rank = replica.comm ? replica.comm->rank() : 0, world = replica.comm ? replica.comm->size() : 1;
  auto rows = plan_step_rows(o, train.count, replica.local_rows, world);
  if (!rows.ok()) return rows.status();
  const bool sharded = replica.comm && replica.shard != ShardStage::none;
  if (sharded && replica.shard != ShardStage::optimizer && o.accumulate > 1)
    return invalid_argument("--shard " + std::string(shard_stage_name(replica.shard)) + " with --accumulate " +
                            std::to_string(o.accumulate) + " would hold every micro-batch's full gradient; use "
                            "--shard optimizer with --accumulate");
  auto setup = set_up_trainer(o, train.spec(), rank, world);
  if (!setup.ok()) return setup.status();
  kernels::cpu::set_blas_threads(o.cpu_threads);
  kernels::cpu::ScopedFlushDenormals flush_denormals;  // see kernels/cpu/denormals.h

  auto state = ReplicaState::create(o, replica, *setup->trainer, setup->space, train.spec(), setup->where);
  if (!state.ok()) return state.status();
  auto start = (*state)->start(o, replica, rows->steps_per_epoch, rank);
  if (!start.ok()) return start.status();
  TROUPE_RETURN_IF_ERROR(replica.checkpoints.check());
  std::optional<BuddyMirror> mirror;  // a sharded replica of a live job
  if (replica.held && replica.comm && (*state)->sharded())
    mirror.emplace(*replica.comm, *(*state)->zero(), replica.mirror_every, replica.mirror_distance, replica.timeout,
                   replica.mirror_comm);
  GradientSync sync(replica, **state, *setup->trainer, setup->space, mirror ? &*mirror : nullptr);
  TrainResult result;
  result.model = setup->model;
  result.device = "cpu";
  result.precision = dtype_name(o.precision);
  spdlog::info("training {} on cpu with {} ({} steps/epoch, OpenBLAS {} kernels, {} thread(s))", result.model,
               (*state)->describe(), rows->steps_per_epoch, kernels::cpu::blas_corename(), o.cpu_threads);
  SliceFeed slices(train, o.seed, o.batch_size, rank, world, o.pads_last_batch());
  BatchFeed& feed = replica.feed ? *replica.feed : slices;
  const ScopedTransform augment(feed, *setup->trainer, o.seed);  // the trainer's augmentation, in the feed
  const auto job_start = Clock::now();
  ReplicaLoop loop(o, train, test, replica, progress, *setup, *rows, **state, sync, feed, mirror ? &*mirror : nullptr);
  TROUPE_RETURN_IF_ERROR(loop.run(*start, &result));
  // --shard parameters: the trained parameters whole only where the caller wants them (final_params:
  // every replica must ask alike, the gather is collective; --save writes layer by layer then).
  TROUPE_RETURN_IF_ERROR(finish_replica(o, replica, **state, loop, final_params != nullptr, &result));
  sync.report(replica);
  result.wall_seconds = seconds_since(job_start);
  if (!o.save_path.empty())
    TROUPE_RETURN_IF_ERROR(
        save_trained(o, train, replica, *setup, **state, loop.steps_done(), final_params != nullptr, result));
  if (final_params) *final_params = std::move((*state)->whole_params());
  return result;
}

}  // namespace troupe
