#include "trainers/pipeline/stage_trainer.h"

#include "trainers/setup/model_file.h"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "collectives/lost_peer.h"
#include "kernels/cpu/blas_info.h"
#include "kernels/cpu/denormals.h"
#include "kernels/cpu/ops.h"
#include "data/feed/batch_feed.h"
#include "trainers/report/epoch_report.h"
#include "trainers/optim/grad_clip.h"
#include "trainers/optim/lr_schedule.h"
#include "trainers/setup/model_file.h"
#include "trainers/optim/optimizer.h"
#include "trainers/optim/param_init.h"
#include "trainers/pipeline/partition.h"
#include "trainers/pipeline/schedule.h"
#include "trainers/pipeline/stage_executor.h"
#include "trainers/pipeline/tied_blocks.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kEvalChunk = 500;                 // rows per evaluation message
constexpr uint64_t kEvalSequence = uint64_t{1} << 40;  // evaluation passes' sequence numbers start here
constexpr uint64_t kMirrorSequence = uint64_t{1} << 42;  // a one-replica pipeline's mirror rounds

// A stage's place in its job and the cut of its batches, checked against the options.
struct StageShape {
  int stage = 0, stages = 1, replica = 0, replicas = 1;
  Schedule schedule = Schedule::gpipe;
  int64_t micro_rows = 0, steps_per_epoch = 0, total_steps = 0;
  bool last = true;  // the last stage: it computes the loss
};

Expected<StageShape> shape_of(const TrainOptions& o, const PipelineOptions& po, const Dataset& train,
                              const StageComms& comms) {
  TROUPE_RETURN_IF_ERROR(o.validate());
  TROUPE_RETURN_IF_ERROR(validate(po, o.batch_size));
  StageShape sh;
  sh.stage = comms.pipe ? comms.pipe->rank() : 0;
  sh.stages = comms.pipe ? comms.pipe->size() : 1;
  sh.replica = comms.replicas ? comms.replicas->rank() : 0;
  sh.replicas = comms.replicas ? comms.replicas->size() : 1;
  if (sh.stages != po.stages || sh.replicas != po.replicas())
    return invalid_argument("this stage's groups hold " + std::to_string(sh.stages) + " stages x " +
                            std::to_string(sh.replicas) + " replicas; the job asks for " + std::to_string(po.stages) +
                            " x " + std::to_string(po.replicas()));
  if (o.accumulate != 1)
    return invalid_argument("--accumulate is not for --strategy pipeline: its --microbatches already sum "
                            "micro-batches' gradients into one update");
  if (o.pads_last_batch())
    return invalid_argument("--last-batch pad: pipeline stages train whole batches for now (their micro-batches "
                            "are cut evenly); drop it");
  sh.schedule = *parse_schedule(po.schedule);  // validated
  const int64_t local_batch = o.batch_size / sh.replicas;
  sh.micro_rows = local_batch / po.microbatches;
  sh.steps_per_epoch = train.count / o.batch_size;
  if (sh.steps_per_epoch == 0)
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " is larger than the " +
                            std::to_string(train.count) + " training examples");
  sh.total_steps = o.max_steps > 0 ? std::min<int64_t>(o.max_steps, sh.steps_per_epoch * o.epochs)
                                   : sh.steps_per_epoch * o.epochs;
  sh.last = sh.stage == sh.stages - 1;
  return sh;
}

// The optimizer over the stage's range; --weight-decay-params matrices: the model's matrix ranges
// cut to this stage's, relative to it.
Expected<std::unique_ptr<Optimizer>> stage_optimizer(OptimizerOptions& oo, const ParameterSpace& space,
                                                     const StagePlan& plan) {
  for (const auto& r : matrix_ranges(space)) {
    const size_t b = std::max(r.first, plan.begin), e = std::min(r.second, plan.end);
    if (b < e) oo.decay_ranges.push_back({b - plan.begin, e - plan.begin});
  }
  oo.decay_ranges_set = true;
  oo.state_ranges = ranges_within(state_ranges(space), plan.begin, plan.end);  // state blocks: their change
  return make_optimizer(oo, plan.end - plan.begin);
}

// Where the stage's training starts: step 0, or a resumed checkpoint's step.
struct StageStart {
  int64_t step = 0;        // steps done
  int first_epoch = 1;     // a resumed stage goes on in the checkpoint's epoch
  int64_t skip_steps = 0;  //   after the steps of it already done
  std::optional<checkpoint::TrainingState> resume;
  int epoch = 0;           // the position of `step`: the epoch of its last step and the steps of it done
  int64_t epoch_step = 0;
};

// The stage's parts the steps work on, made by Loop::run in this order.
struct StageParts {
  const TrainerSetup& setup;
  const StagePlan& plan;
  Optimizer& opt;
  std::vector<float>& params;
  std::vector<float>& grads;
  StageTies& ties;
  const Parameters& param_view;
  Gradients& grad_view;
  StageExecutor& exec;
  const std::vector<PipeOp>& ops;
  BatchFeed& feed;
  StageResult& out;
  size_t buddy_params;  // the range size of the stage this one mirrors (its buddy mirror), or 0
};

struct Loop {
  const TrainOptions& o;
  const PipelineOptions& po;
  const Dataset& train;
  const Dataset& test;
  const StageComms& comms;
  const ProgressFn& progress;
  const StageCheckpoints& ckpt;

  Expected<StageResult> run();
  // The stage's parameters as a single process would initialise them, a checkpoint's in their
  // place (its optimizer state loaded too), or --init-from's.
  Expected<StageStart> start_params(const StageShape& sh, const TrainerSetup& setup, const StagePlan& plan,
                                    Optimizer& opt, std::vector<float>& params) const;
  // The stage's report of what it holds, the result's model, and the log line saying so.
  void describe(const StageShape& sh, const StageParts& parts, StageResult& out) const;
  // The last stages' test counts and losses summed over the replicas: accuracy (-1 when not
  // counted) and mean loss; other stages' accuracy is -1.
  Expected<SplitScore> evaluate(StageExecutor& exec, const Parameters& params, int epoch, int replica,
                                int replicas) const;
};

Expected<SplitScore> Loop::evaluate(StageExecutor& exec, const Parameters& params, int epoch, int replica,
                                    int replicas) const {
  const int64_t first = test.count * replica / replicas, last = test.count * (replica + 1) / replicas;
  StepTotals t;
  TROUPE_RETURN_IF_ERROR(exec.forward_only(test.images.data() + static_cast<size_t>(first) * test.features(),
                                           TargetRows::of(test).from(first, test.target_width), last - first, test.features(), kEvalChunk,
                                           params, kEvalSequence + epoch, &t));
  const bool is_last = !comms.pipe || comms.pipe->rank() == comms.pipe->size() - 1;
  if (!is_last) return SplitScore{};
  EvalTotals mine;
  mine.correct = t.correct;
  mine.loss_sum = t.loss_sum;
  mine.rows = last - first;
  return replicas_score(mine, test.count, comms.replicas, comms.timeout);
}

Expected<StageStart> Loop::start_params(const StageShape& sh, const TrainerSetup& setup, const StagePlan& plan,
                                        Optimizer& opt, std::vector<float>& params) const {
  const std::string& where = setup.where;
  const size_t n = plan.end - plan.begin;
  init_parameter_range(setup.space, o.seed, plan.begin, plan.end, params.data());
  StageStart start;
  if (ckpt.resume) {
    auto loaded = ckpt.resume(setup.space.size(), plan.begin, plan.end);
    if (!loaded.ok()) return loaded.status().with_context(where + ": stage " + std::to_string(sh.stage));
    start.resume = std::move(*loaded);
  }
  if (start.resume) {
    const checkpoint::TrainingState& r = *start.resume;
    const std::string what = where + ": stage " + std::to_string(sh.stage) + "'s part of the checkpoint of step " +
                             std::to_string(r.step);
    if (r.params.size() != n)
      return invalid_argument(what + " holds " + std::to_string(r.params.size()) + " parameters; the stage has " +
                              std::to_string(n) + " (another model or partition?)");
    TROUPE_RETURN_IF_ERROR(opt.load_state(r.optimizer, 0).with_context(what));
    params = r.params;
    start.step = r.step;
    const checkpoint::ResumeAt at = checkpoint::resume_at(r, sh.steps_per_epoch);
    start.first_epoch = at.epoch;
    start.skip_steps = at.skip_steps;
    start.epoch = static_cast<int>(r.epoch);
    start.epoch_step = r.epoch_step;
    spdlog::info("pipeline stage {}/{} of replica {}/{}: resuming at step {} (epoch {} after {} "
                 "of its steps)", sh.stage, sh.stages, sh.replica, sh.replicas, start.step, start.first_epoch,
                 start.skip_steps);
  }
  if (!start.resume && !o.init_from.empty()) {
    // --init-from: the whole model initialised as one process would (blocks the file lacks keep
    // that under --init-partial), the file loaded over it, the stage's range kept.
    std::vector<float> all(setup.space.size());
    init_parameter_range(setup.space, o.seed, 0, all.size(), all.data());
    TROUPE_RETURN_IF_ERROR(load_model_into(o.init_from, setup.space, o.model, o.init_partial, all.data())
                               .with_context(where + ": stage " + std::to_string(sh.stage) + ": --init-from"));
    std::copy(all.begin() + static_cast<std::ptrdiff_t>(plan.begin), all.begin() + static_cast<std::ptrdiff_t>(plan.end),
              params.begin());
  }
  return start;
}

void Loop::describe(const StageShape& sh, const StageParts& parts, StageResult& out) const {
  const StagePlan& plan = parts.plan;
  const size_t n = plan.end - plan.begin;
  StageReport& rep = out.report;
  rep.stage = sh.stage;
  rep.stages = sh.stages;
  rep.replica = sh.replica;
  rep.replicas = sh.replicas;
  rep.first_layer = plan.first_layer;
  rep.end_layer = plan.end_layer;
  rep.begin = plan.begin;
  rep.end = plan.end;
  const size_t state_vectors = parts.opt.save_state(0, 0).vectors.size();
  rep.param_bytes = (n + parts.ties.copy_floats()) * sizeof(float);
  rep.grad_bytes = (parts.grads.size() + parts.ties.copy_floats()) * sizeof(float);
  rep.optimizer_bytes = state_vectors * n * sizeof(float);
  rep.model_bytes = (2 + state_vectors) * parts.setup.space.size() * sizeof(float);
  rep.activation_bytes = parts.exec.activation_bytes();
  TrainResult& result = out.train;
  result.model = parts.setup.model;
  result.device = "cpu";
  spdlog::info("pipeline stage {}/{} of replica {}/{}: layers [{}, {}) ({} of {} parameters), {} x {} micro-batches "
               "of {} rows", sh.stage, sh.stages, sh.replica, sh.replicas, plan.first_layer, plan.end_layer, n,
               parts.setup.space.size(), schedule_name(sh.schedule), po.microbatches, sh.micro_rows);
}

// The epochs of a set-up stage, each of steps that draw the batch (draw), run the schedule's passes
// (pass), average the gradients over the replicas (reduce), clip them by the whole model's norm
// (clip), then update, share tied blocks, checkpoint and count (update).
class StageSteps {
 public:
  StageSteps(const Loop& loop, const StageShape& sh, const StageParts& parts, const StageStart& start, float lr)
      : l_(loop), o_(loop.o), sh_(sh), p_(parts), where_(parts.setup.where), n_(parts.plan.end - parts.plan.begin),
        lr_(lr), first_epoch_(start.first_epoch), skip_steps_(start.skip_steps), step_(start.step),
        applied_{start.step, start.epoch, start.epoch_step}, resumed_(start.resume.has_value()) {
    parse_lr_schedule(o_.lr_schedule, &lr_schedule_);
    sync_.timeout = loop.comms.timeout;
    stop_ = o_.max_steps > 0 && step_ >= o_.max_steps;
  }

  // Every epoch from the start on; the result's history filled. A run cut short by a lost peer
  // leaves the stage's state in comms.hold, when set.
  Status run() {
    Status st = run_epochs();
    StageHold* hold = l_.comms.hold;
    if (!st.ok() && hold && collectives::lost_peer(st)) keep(hold);
    return st;
  }
  int64_t steps_done() const { return step_; }
  double train_seconds() const { return train_seconds_; }

 private:
  // Where the stage's parameters are: after `step` steps, `epoch_step` of them in `epoch`.
  struct Position {
    int64_t step = 0;
    int epoch = 0;
    int64_t epoch_step = 0;
  };
  Status run_epochs();
  Status run_epoch(int epoch);
  // An epoch's test score and its line in the result (the last stage reports it).
  Status end_epoch(int epoch, const EpochTally& tally, double seconds);
  // The stage's state at `at`, as a checkpoint's, into `out` (its memory reused).
  void capture(const Position& at, checkpoint::TrainingState* out) const;
  // Live recovery: the stage's state (and the one before its newest update) into `hold`.
  void keep(StageHold* hold);
  // Live recovery: the state before the update kept. (No barrier is needed: a stage applies step
  // t + 1 only after every stage of every replica began step t + 1 — its pass needs its
  // neighbours' messages of t + 1, its all-reduce its replicas' — so every stage applied t by then,
  // and the stages' states differ by one step at most.)
  void keep_before();
  // A one-replica pipeline's buddy mirror: a round of the stages' states at the applied step (every
  // mirror_every steps, and the `first` at the start).
  Status mirror_round(bool first = false);
  // Mirror rounds more than a step apart: the stage keeps its own rounds, not the state before
  // each update.
  bool spaced_rounds() const { return l_.comms.mirror_distance > 0 && l_.comms.mirror_every > 1; }
  // Step s of `epoch`; false: skipped (trained before the checkpoint this run resumed from).
  Expected<bool> run_step(int epoch, int64_t s, EpochTally& tally, Clock::time_point epoch_start);
  // The schedule's passes over the micro-batches, the tied blocks' gradients gathered; the mean
  // loss and the correct count in *loss, *correct.
  Status pass(const Batch& batch, const std::string& at, float* loss, int64_t* correct);
  Status reduce(const std::string& at, float* loss, int64_t* correct);
  Status clip(const std::string& at);
  Status update(int epoch, int64_t s, const std::string& at);

  const Loop& l_;
  const TrainOptions& o_;
  const StageShape& sh_;
  const StageParts& p_;
  const std::string& where_;
  const size_t n_;
  const float lr_;
  LrSchedule lr_schedule_ = LrSchedule::constant;
  collectives::CollectiveOptions sync_;
  const int first_epoch_;
  const int64_t skip_steps_;
  int64_t step_;  // steps done
  Position applied_;  // the steps applied to the parameters (step_ runs ahead of it within a step)
  std::optional<checkpoint::TrainingState> before_;  // live recovery: the state before the newest update
  MirroredStage mirror_;                             //   and the buddy stage's newest rounds
  MirroredStage own_;                                //   and its own (rounds K > 1 steps apart)
  checkpoint::TrainingState round_;                  //   the buddy mirror's round, its memory reused
  const bool resumed_;
  bool stop_ = false;
  double train_seconds_ = 0;
};

Status StageSteps::run_epochs() {
  // Resumed at the end of the job's last epoch (live recovery after a peer was lost while it was
  // scored): that epoch's score, which the job ends with.
  TROUPE_RETURN_IF_ERROR(mirror_round(true));  // the first round: the start itself
  if (resumed_ && first_epoch_ > o_.epochs && step_ > 0) return end_epoch(o_.epochs, EpochTally{}, 0.0);
  for (int epoch = first_epoch_; epoch <= o_.epochs && !stop_; ++epoch) TROUPE_RETURN_IF_ERROR(run_epoch(epoch));
  return {};
}

void StageSteps::capture(const Position& at, checkpoint::TrainingState* out) const {
  out->step = at.step;
  out->epoch = at.epoch;
  out->epoch_step = at.epoch_step;
  out->params.assign(p_.params.begin(), p_.params.end());
  p_.opt.save_state_into(0, n_, &out->optimizer);
}

void StageSteps::keep(StageHold* hold) {
  capture(applied_, &hold->newest);
  hold->before.reset();
  if (before_ && before_->step == applied_.step - 1) hold->before = std::move(before_);
  hold->mirror = std::move(mirror_);
  hold->own = std::move(own_);
  hold->held = true;
  spdlog::warn("{}: pipeline stage {} of replica {} keeps its state of step {}{} for live recovery", where_, sh_.stage,
               sh_.replica, applied_.step, hold->before ? " and the one before" : "");
}

void StageSteps::keep_before() {
  // (Rounds K > 1 steps apart: a one-replica pipeline goes back to a round, never to this copy.)
  if (!l_.comms.hold || sh_.stages == 1 || spaced_rounds()) return;
  if (!before_) before_.emplace();
  capture(applied_, &*before_);
}

Status StageSteps::mirror_round(bool first) {
  const StageComms& c = l_.comms;
  if (!c.hold || c.mirror_distance <= 0 || !c.pipe) return {};
  if (!first && applied_.step % std::max(1, c.mirror_every) != 0) return {};
  capture(applied_, &round_);
  if (spaced_rounds()) own_.keep(sh_.stage, round_);  // before it is sent: the buddy holds no round this stage lacks
  return exchange_stage_state(*c.pipe, c.mirror_distance, round_, p_.buddy_params, &mirror_,
                              kMirrorSequence + static_cast<uint64_t>(applied_.step), c.timeout)
      .with_context(where_);
}

Status StageSteps::run_epoch(int epoch) {
  const auto epoch_start = Clock::now();
  if (epoch == first_epoch_ && skip_steps_ > 0) p_.feed.pass_over(skip_steps_);  // read for nothing
  TROUPE_RETURN_IF_ERROR(p_.feed.begin_epoch(epoch));
  EpochTally tally;
  for (int64_t s = 0; s < sh_.steps_per_epoch; ++s) {
    auto trained = run_step(epoch, s, tally, epoch_start);
    if (!trained.ok()) return trained.status();
    if (!*trained) continue;
    if (o_.max_steps > 0 && step_ >= o_.max_steps) {
      stop_ = true;
      break;
    }
  }
  TROUPE_RETURN_IF_ERROR(p_.feed.end_epoch());
  const double epoch_seconds = seconds_since(epoch_start);
  train_seconds_ += epoch_seconds;
  return end_epoch(epoch, tally, epoch_seconds);
}

Status StageSteps::end_epoch(int epoch, const EpochTally& tally, double epoch_seconds) {
  EpochStats es = epoch_stats(epoch, tally, o_.batch_size, epoch_seconds);
  if (o_.evaluate_each_epoch || epoch == o_.epochs || stop_) {
    auto score = l_.evaluate(p_.exec, p_.param_view, epoch, sh_.replica, sh_.replicas);
    if (!score.ok()) return score.status().with_context(where_ + ": evaluate after epoch " + std::to_string(epoch));
    es.test_accuracy = score->accuracy;
    es.test_loss = score->loss;
  }
  TrainResult& result = p_.out.train;
  if (sh_.last) report_epoch(es, o_, sh_.steps_per_epoch, &result, l_.progress);
  else result.history.push_back(es);
  return {};
}

Expected<bool> StageSteps::run_step(int epoch, int64_t s, EpochTally& tally, Clock::time_point epoch_start) {
  const std::string at = " at epoch " + std::to_string(epoch) + ", step " + std::to_string(s + 1);
  if (l_.comms.cancel && l_.comms.cancel->load()) return unavailable("stopped" + at);
  Batch batch;
  auto more = p_.feed.next(&batch);
  if (!more.ok()) return more.status().with_context("data of epoch " + std::to_string(epoch));
  if (!*more) return internal_error("the data feed ran out" + at);
  if (epoch == first_epoch_ && s < skip_steps_) return false;  // trained before the checkpoint resumed from
  float loss = 0;
  int64_t correct = 0;
  TROUPE_RETURN_IF_ERROR(pass(batch, at, &loss, &correct));
  TROUPE_RETURN_IF_ERROR(reduce(at, &loss, &correct));
  TROUPE_RETURN_IF_ERROR(clip(at));
  ++step_;
  if (sh_.last && step_ % o_.loss_check_every == 0 && !std::isfinite(loss))
    return nonfinite_loss(loss, epoch, s + 1, sh_.steps_per_epoch, step_, lr_);
  keep_before();
  TROUPE_RETURN_IF_ERROR(update(epoch, s, at));
  tally.add(loss, std::max<int64_t>(correct, 0));
  if (sh_.last && l_.progress)
    l_.progress(step_progress(o_, epoch, sh_.steps_per_epoch, tally, seconds_since(epoch_start),
                              sh_.total_steps - step_));
  return true;
}

Status StageSteps::pass(const Batch& batch, const std::string& at, float* loss, int64_t* correct) {
  std::fill(p_.grads.begin(), p_.grads.end(), 0.0f);
  p_.ties.zero_grads();
  StepTotals totals;
  StageReport& rep = p_.out.report;
  const auto pass_start = Clock::now();
  const double busy_before = p_.exec.busy_seconds();
  TROUPE_RETURN_IF_ERROR(p_.exec.run_step(p_.ops, batch.inputs, TargetRows::of(batch), p_.param_view, p_.grad_view,
                                          static_cast<uint64_t>(step_ + 1), &totals)
                             .with_context(where_ + at));
  rep.pass_seconds += seconds_since(pass_start);
  rep.busy_seconds += p_.exec.busy_seconds() - busy_before;
  // Tied blocks: the users' gradients added to the owner's, before its replicas average them.
  TROUPE_RETURN_IF_ERROR(p_.ties.gather_gradients(p_.grads.data(), static_cast<uint64_t>(step_ + 1))
                             .with_context(where_ + at));
  kernels::cpu::scale(p_.grads.data(), n_, 1.0f / l_.po.microbatches);  // the mean over the local batch
  *loss = static_cast<float>(totals.loss_sum / l_.po.microbatches);
  *correct = totals.correct;
  return {};
}

// The last stage's loss and count ride in the two slots after its gradients.
Status StageSteps::reduce(const std::string& at, float* loss, int64_t* correct) {
  std::vector<float>& grads = p_.grads;
  if (sh_.last) {
    grads[n_] = *loss;
    grads[n_ + 1] = static_cast<float>(*correct);
  }
  if (l_.comms.replicas) {
    TROUPE_RETURN_IF_ERROR(l_.comms.replicas->allreduce(grads.data(), grads.data(), grads.size(), DType::f32,
                                                        collectives::ReduceOp::avg, sync_)
                               .with_context(where_ + ": all-reducing stage " + std::to_string(sh_.stage) +
                                             "'s gradients" + at));
    if (sh_.last) {
      *loss = grads[n_];
      *correct = *correct < 0 ? -1 : std::llround(grads[n_ + 1] * sh_.replicas);
    }
  }
  return {};
}

// By the whole model's norm: every stage's squares summed over the pipe.
Status StageSteps::clip(const std::string& at) {
  if (o_.clip_grad_norm <= 0) return {};
  const FlatRanges& state = p_.opt.kept_ranges();  // state blocks' changes: in no norm, never scaled
  auto total = p_.exec.sum_over_stages(squared_norm(p_.grads.data(), n_, state), static_cast<uint64_t>(step_ + 1));
  if (!total.ok()) return total.status().with_context(where_ + ": the gradient norm" + at);
  const float factor = clip_factor(std::sqrt(*total), o_.clip_grad_norm);
  if (factor != 1.0f) scale_except(p_.grads.data(), n_, factor, state);
  return {};
}

Status StageSteps::update(int epoch, int64_t s, const std::string& at) {
  p_.opt.set_lr(scheduled_lr(lr_schedule_, lr_, step_ - 1, sh_.total_steps, o_.warmup_steps));
  p_.opt.step(p_.params.data(), p_.grads.data());
  applied_ = Position{step_, epoch, s + 1};
  if (l_.comms.steps_done) *l_.comms.steps_done = step_;
  TROUPE_RETURN_IF_ERROR(p_.ties.share_values(p_.params.data(), static_cast<uint64_t>(step_)).with_context(where_ + at));
  const StageCheckpoints& ckpt = l_.ckpt;
  if (ckpt.every > 0 && step_ % ckpt.every == 0) {
    const StagePlan& plan = p_.plan;
    const StageSnapshot snap{step_, epoch, s + 1, plan.begin, plan.end, p_.setup.space.size(), p_.params.data(), &p_.opt};
    TROUPE_RETURN_IF_ERROR(ckpt.write(snap).with_context(where_ + ": checkpoint" + at));
  }
  return mirror_round();
}

Expected<StageResult> Loop::run() {
  auto shape = shape_of(o, po, train, comms);
  if (!shape.ok()) return shape.status();
  const StageShape& sh = *shape;
  auto setup = set_up_trainer(o, train.spec(), sh.replica, sh.replicas);
  if (!setup.ok()) return setup.status();
  const std::string& where = setup->where;
  TROUPE_RETURN_IF_ERROR(check_pipeline_model(o, po, train.spec()));
  LayerModel* model = setup->trainer->layers();  // not null: checked
  const std::vector<LayerInfo> layers = model->layer_infos();
  std::vector<int> explicit_layers;
  if (!po.stage_layers.empty()) explicit_layers = *parse_stage_layers(po.stage_layers);  // validated
  auto plans = partition_layers(layers, train.features(), sh.stages, explicit_layers);
  if (!plans.ok()) return plans.status().with_context(where);
  const StagePlan plan = (*plans)[sh.stage];
  const size_t n = plan.end - plan.begin;

  kernels::cpu::set_blas_threads(o.cpu_threads);
  kernels::cpu::ScopedFlushDenormals flush_denormals;
  OptimizerOptions oo = optimizer_options(o);
  auto opt = stage_optimizer(oo, setup->space, plan);
  if (!opt.ok()) return opt.status();

  // The stage's range only. The last stage carries its loss and correct count in two extra slots
  // of the replicas' all-reduce.
  std::vector<float> params(n), grads(n + (sh.last ? 2 : 0));
  auto start = start_params(sh, *setup, plan, **opt, params);
  if (!start.ok()) return start.status();
  if (ckpt.every > 0 && !ckpt.write) return invalid_argument("pipeline checkpoints need a writer");
  // Tied blocks across stages: this stage's copies of blocks another stage owns, in its views, set
  // to the owner's values before the first step (a fresh start, a resume, --init-from alike).
  StageTies ties(tied_blocks(layers, *plans), sh.stage, plan.begin, comms.pipe, comms.timeout);
  TROUPE_RETURN_IF_ERROR(ties.share_values(params.data(), static_cast<uint64_t>(start->step))
                             .with_context(where + ": tied blocks before training"));
  const Parameters param_view(params.data(), n, plan.begin, ties.param_segments(), ties.segments());
  Gradients grad_view(grads.data(), n, nullptr, plan.begin, ties.grad_segments(), ties.segments());
  StageExecutor exec(*model, layers, plan, sh.stage, sh.stages, comms.pipe, sh.micro_rows,
                     stash_slots(sh.schedule, sh.stage, sh.stages, po.microbatches), comms.timeout);
  exec.set_label_width(train.target_width);
  const std::vector<PipeOp> ops = stage_ops(sh.schedule, sh.stage, sh.stages, po.microbatches);

  StageResult out;
  SliceFeed feed(train, o.seed, o.batch_size, sh.replica, sh.replicas);
  size_t buddy_params = 0;  // the stage `mirror_distance` behind on the ring: whose state this one keeps
  if (comms.mirror_distance > 0) {
    const StagePlan& buddy = (*plans)[static_cast<size_t>(((sh.stage - comms.mirror_distance) % sh.stages + sh.stages) %
                                                          sh.stages)];
    buddy_params = buddy.end - buddy.begin;
  }
  const StageParts parts{*setup, plan, **opt, params, grads, ties, param_view, grad_view, exec, ops, feed, out,
                         buddy_params};
  describe(sh, parts, out);
  feed.set_transform(trainer_transform(*setup->trainer, o.seed));  // augmentation (the first stage's inputs)
  const auto job_start = Clock::now();
  StageSteps steps(*this, sh, parts, *start, oo.lr);
  TROUPE_RETURN_IF_ERROR(steps.run());

  TrainResult& result = out.train;
  const int64_t step = steps.steps_done();
  const double train_seconds = steps.train_seconds();
  if (!kernels::cpu::all_finite(params.data(), n))
    return numeric_error("stage " + std::to_string(sh.stage) + "'s parameters are not finite after training; lower --lr");
  finish_result(&result, step, o.batch_size, train_seconds);
  if (start->resume && train_seconds > 0)  // the throughput of the steps this run trained
    result.samples_per_second = static_cast<double>(step - start->resume->step) * o.batch_size / train_seconds;
  result.wall_seconds = seconds_since(job_start);
  StageReport& rep = out.report;
  rep.bubble_fraction = rep.pass_seconds > 0 ? std::max(0.0, 1.0 - rep.busy_seconds / rep.pass_seconds) : 0;
  out.params = std::move(params);
  return out;
}

}  // namespace

Expected<StageResult> train_stage(const TrainOptions& o, const PipelineOptions& po, const Dataset& train,
                                  const Dataset& test, const StageComms& comms, const ProgressFn& progress,
                                  const StageCheckpoints& checkpoints) {
  Loop loop{o, po, train, test, comms, progress, checkpoints};
  auto result = loop.run();
  if (!result.ok()) {
    // Tell the neighbours and the replicas at once, so they name this stage instead of timing out.
    if (comms.pipe) comms.pipe->abort(result.status());
    if (comms.replicas) comms.replicas->transport().abort(result.status());
  }
  return result;
}

}  // namespace troupe::pipeline
