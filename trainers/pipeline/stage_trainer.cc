#include "trainers/pipeline/stage_trainer.h"

#include "trainers/setup/model_file.h"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

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

struct Loop {
  const TrainOptions& o;
  const PipelineOptions& po;
  const Dataset& train;
  const Dataset& test;
  const StageComms& comms;
  const ProgressFn& progress;
  const StageCheckpoints& ckpt;

  Expected<StageResult> run();
  // The last stages' test counts and losses summed over the replicas: accuracy (-1 when not
  // counted) and mean loss; other stages' accuracy is -1.
  Expected<SplitScore> evaluate(StageExecutor& exec, const Parameters& params, int epoch, int replica, int replicas);
};

Expected<SplitScore> Loop::evaluate(StageExecutor& exec, const Parameters& params, int epoch, int replica,
                                    int replicas) {
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

Expected<StageResult> Loop::run() {
  TROUPE_RETURN_IF_ERROR(o.validate());
  TROUPE_RETURN_IF_ERROR(validate(po, o.batch_size));
  const int stage = comms.pipe ? comms.pipe->rank() : 0, stages = comms.pipe ? comms.pipe->size() : 1;
  const int replica = comms.replicas ? comms.replicas->rank() : 0;
  const int replicas = comms.replicas ? comms.replicas->size() : 1;
  if (stages != po.stages || replicas != po.replicas())
    return invalid_argument("this stage's groups hold " + std::to_string(stages) + " stages x " +
                            std::to_string(replicas) + " replicas; the job asks for " + std::to_string(po.stages) +
                            " x " + std::to_string(po.replicas()));
  if (o.accumulate != 1)
    return invalid_argument("--accumulate is not for --strategy pipeline: its --microbatches already sum "
                            "micro-batches' gradients into one update");
  if (o.pads_last_batch())
    return invalid_argument("--last-batch pad: pipeline stages train whole batches for now (their micro-batches "
                            "are cut evenly); drop it");
  const Schedule schedule = *parse_schedule(po.schedule);  // validated
  const int64_t local_batch = o.batch_size / replicas, micro_rows = local_batch / po.microbatches;
  const int64_t steps_per_epoch = train.count / o.batch_size;
  if (steps_per_epoch == 0)
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " is larger than the " +
                            std::to_string(train.count) + " training examples");

  auto setup = set_up_trainer(o, train.spec(), replica, replicas);
  if (!setup.ok()) return setup.status();
  const std::string& where = setup->where;
  TROUPE_RETURN_IF_ERROR(check_pipeline_model(o, po, train.spec()));
  LayerModel* model = setup->trainer->layers();  // not null: checked
  const std::vector<LayerInfo> layers = model->layer_infos();
  std::vector<int> explicit_layers;
  if (!po.stage_layers.empty()) explicit_layers = *parse_stage_layers(po.stage_layers);  // validated
  auto plans = partition_layers(layers, train.features(), stages, explicit_layers);
  if (!plans.ok()) return plans.status().with_context(where);
  const StagePlan plan = (*plans)[stage];
  const size_t n = plan.end - plan.begin;

  kernels::cpu::set_blas_threads(o.cpu_threads);
  kernels::cpu::ScopedFlushDenormals flush_denormals;
  OptimizerOptions oo = optimizer_options(o);
  // --weight-decay-params matrices: the model's matrix ranges cut to this stage's, relative to it.
  for (const auto& r : matrix_ranges(setup->space)) {
    const size_t b = std::max(r.first, plan.begin), e = std::min(r.second, plan.end);
    if (b < e) oo.decay_ranges.push_back({b - plan.begin, e - plan.begin});
  }
  oo.decay_ranges_set = true;
  auto opt = make_optimizer(oo, n);
  if (!opt.ok()) return opt.status();
  LrSchedule lr_schedule = LrSchedule::constant;
  parse_lr_schedule(o.lr_schedule, &lr_schedule);
  const int64_t total_steps =
      o.max_steps > 0 ? std::min<int64_t>(o.max_steps, steps_per_epoch * o.epochs) : steps_per_epoch * o.epochs;

  // The stage's range only. The last stage carries its loss and correct count in two extra slots
  // of the replicas' all-reduce.
  const bool last = stage == stages - 1;
  std::vector<float> params(n), grads(n + (last ? 2 : 0));
  init_parameter_range(setup->space, o.seed, plan.begin, plan.end, params.data());
  int64_t step = 0;        // steps done
  int first_epoch = 1;     // a resumed stage goes on in the checkpoint's epoch
  int64_t skip_steps = 0;  //   after the steps of it already done
  std::optional<checkpoint::TrainingState> resume;
  if (ckpt.resume) {
    auto loaded = ckpt.resume(setup->space.size(), plan.begin, plan.end);
    if (!loaded.ok()) return loaded.status().with_context(where + ": stage " + std::to_string(stage));
    resume = std::move(*loaded);
  }
  if (resume) {
    const checkpoint::TrainingState& r = *resume;
    const std::string what = where + ": stage " + std::to_string(stage) + "'s part of the checkpoint of step " +
                             std::to_string(r.step);
    if (r.params.size() != n)
      return invalid_argument(what + " holds " + std::to_string(r.params.size()) + " parameters; the stage has " +
                              std::to_string(n) + " (another model or partition?)");
    TROUPE_RETURN_IF_ERROR((*opt)->load_state(r.optimizer, 0).with_context(what));
    params = r.params;
    step = r.step;
    const checkpoint::ResumeAt at = checkpoint::resume_at(r, steps_per_epoch);
    first_epoch = at.epoch;
    skip_steps = at.skip_steps;
    spdlog::info("pipeline stage {}/{} of replica {}/{}: resuming from the checkpoint of step {} (epoch {} after {} "
                 "of its steps)", stage, stages, replica, replicas, step, first_epoch, skip_steps);
  }
  if (!resume && !o.init_from.empty()) {
    // --init-from: the whole model initialised as one process would (blocks the file lacks keep
    // that under --init-partial), the file loaded over it, the stage's range kept.
    std::vector<float> all(setup->space.size());
    init_parameter_range(setup->space, o.seed, 0, all.size(), all.data());
    TROUPE_RETURN_IF_ERROR(load_model_into(o.init_from, setup->space, o.model, o.init_partial, all.data())
                               .with_context(where + ": stage " + std::to_string(stage) + ": --init-from"));
    std::copy(all.begin() + static_cast<std::ptrdiff_t>(plan.begin), all.begin() + static_cast<std::ptrdiff_t>(plan.end),
              params.begin());
  }
  if (ckpt.every > 0 && !ckpt.write) return invalid_argument("pipeline checkpoints need a writer");
  // Tied blocks across stages: this stage's copies of blocks another stage owns, in its views, set
  // to the owner's values before the first step (a fresh start, a resume, --init-from alike).
  StageTies ties(tied_blocks(layers, *plans), stage, plan.begin, comms.pipe, comms.timeout);
  TROUPE_RETURN_IF_ERROR(ties.share_values(params.data(), static_cast<uint64_t>(step))
                             .with_context(where + ": tied blocks before training"));
  const Parameters param_view(params.data(), n, plan.begin, ties.param_segments(), ties.segments());
  Gradients grad_view(grads.data(), n, nullptr, plan.begin, ties.grad_segments(), ties.segments());
  StageExecutor exec(*model, layers, plan, stage, stages, comms.pipe, micro_rows,
                     stash_slots(schedule, stage, stages, po.microbatches), comms.timeout);
  exec.set_label_width(train.target_width);
  const std::vector<PipeOp> ops = stage_ops(schedule, stage, stages, po.microbatches);

  StageResult out;
  StageReport& rep = out.report;
  rep.stage = stage;
  rep.stages = stages;
  rep.replica = replica;
  rep.replicas = replicas;
  rep.first_layer = plan.first_layer;
  rep.end_layer = plan.end_layer;
  rep.begin = plan.begin;
  rep.end = plan.end;
  const size_t state_vectors = (*opt)->save_state(0, 0).vectors.size();
  rep.param_bytes = (n + ties.copy_floats()) * sizeof(float);
  rep.grad_bytes = (grads.size() + ties.copy_floats()) * sizeof(float);
  rep.optimizer_bytes = state_vectors * n * sizeof(float);
  rep.model_bytes = (2 + state_vectors) * setup->space.size() * sizeof(float);
  rep.activation_bytes = exec.activation_bytes();
  TrainResult& result = out.train;
  result.model = setup->model;
  result.device = "cpu";
  spdlog::info("pipeline stage {}/{} of replica {}/{}: layers [{}, {}) ({} of {} parameters), {} x {} micro-batches "
               "of {} rows", stage, stages, replica, replicas, plan.first_layer, plan.end_layer, n,
               setup->space.size(), schedule_name(schedule), po.microbatches, micro_rows);

  SliceFeed feed(train, o.seed, o.batch_size, replica, replicas);
  feed.set_transform(trainer_transform(*setup->trainer, o.seed));  // augmentation (the first stage's inputs)
  collectives::CollectiveOptions sync;
  sync.timeout = comms.timeout;
  const auto job_start = Clock::now();
  double train_seconds = 0;
  bool stop = o.max_steps > 0 && step >= o.max_steps;
  for (int epoch = first_epoch; epoch <= o.epochs && !stop; ++epoch) {
    const auto epoch_start = Clock::now();
    TROUPE_RETURN_IF_ERROR(feed.begin_epoch(epoch));
    EpochTally tally;
    for (int64_t s = 0; s < steps_per_epoch; ++s) {
      const std::string at = " at epoch " + std::to_string(epoch) + ", step " + std::to_string(s + 1);
      if (comms.cancel && comms.cancel->load()) return unavailable("stopped" + at);
      Batch batch;
      auto more = feed.next(&batch);
      if (!more.ok()) return more.status().with_context("data of epoch " + std::to_string(epoch));
      if (!*more) return internal_error("the data feed ran out" + at);
      if (epoch == first_epoch && s < skip_steps) continue;  // trained before the checkpoint resumed from
      std::fill(grads.begin(), grads.end(), 0.0f);
      ties.zero_grads();
      StepTotals totals;
      const auto pass_start = Clock::now();
      const double busy_before = exec.busy_seconds();
      TROUPE_RETURN_IF_ERROR(exec.run_step(ops, batch.inputs, TargetRows::of(batch), param_view, grad_view,
                                           static_cast<uint64_t>(step + 1), &totals)
                                 .with_context(where + at));
      rep.pass_seconds += seconds_since(pass_start);
      rep.busy_seconds += exec.busy_seconds() - busy_before;
      // Tied blocks: the users' gradients added to the owner's, before its replicas average them.
      TROUPE_RETURN_IF_ERROR(ties.gather_gradients(grads.data(), static_cast<uint64_t>(step + 1))
                                 .with_context(where + at));
      kernels::cpu::scale(grads.data(), n, 1.0f / po.microbatches);  // the mean over the local batch
      float loss = static_cast<float>(totals.loss_sum / po.microbatches);
      int64_t correct = totals.correct;
      if (last) {
        grads[n] = loss;
        grads[n + 1] = static_cast<float>(correct);
      }
      if (comms.replicas) {
        TROUPE_RETURN_IF_ERROR(comms.replicas->allreduce(grads.data(), grads.data(), grads.size(), DType::f32,
                                                         collectives::ReduceOp::avg, sync)
                                   .with_context(where + ": all-reducing stage " + std::to_string(stage) +
                                                 "'s gradients" + at));
        if (last) {
          loss = grads[n];
          correct = correct < 0 ? -1 : std::llround(grads[n + 1] * replicas);
        }
      }
      if (o.clip_grad_norm > 0) {  // by the whole model's norm: every stage's squares summed over the pipe
        auto total = exec.sum_over_stages(squared_norm(grads.data(), n), static_cast<uint64_t>(step + 1));
        if (!total.ok()) return total.status().with_context(where + ": the gradient norm" + at);
        const float factor = clip_factor(std::sqrt(*total), o.clip_grad_norm);
        if (factor != 1.0f) kernels::cpu::scale(grads.data(), n, factor);
      }
      ++step;
      if (last && step % o.loss_check_every == 0 && !std::isfinite(loss))
        return nonfinite_loss(loss, epoch, s + 1, steps_per_epoch, step, oo.lr);
      (*opt)->set_lr(scheduled_lr(lr_schedule, oo.lr, step - 1, total_steps, o.warmup_steps));
      (*opt)->step(params.data(), grads.data());
      TROUPE_RETURN_IF_ERROR(ties.share_values(params.data(), static_cast<uint64_t>(step)).with_context(where + at));
      if (ckpt.every > 0 && step % ckpt.every == 0) {
        const StageSnapshot snap{step, epoch, s + 1, plan.begin, plan.end, setup->space.size(), params.data(), opt->get()};
        TROUPE_RETURN_IF_ERROR(ckpt.write(snap).with_context(where + ": checkpoint" + at));
      }
      tally.add(loss, std::max<int64_t>(correct, 0));
      if (last && progress)
        progress(step_progress(o, epoch, steps_per_epoch, tally, seconds_since(epoch_start), total_steps - step));
      if (o.max_steps > 0 && step >= o.max_steps) {
        stop = true;
        break;
      }
    }
    TROUPE_RETURN_IF_ERROR(feed.end_epoch());
    const double epoch_seconds = seconds_since(epoch_start);
    train_seconds += epoch_seconds;
    EpochStats es = epoch_stats(epoch, tally, o.batch_size, epoch_seconds);
    if (o.evaluate_each_epoch || epoch == o.epochs || stop) {
      auto score = evaluate(exec, param_view, epoch, replica, replicas);
      if (!score.ok()) return score.status().with_context(where + ": evaluate after epoch " + std::to_string(epoch));
      es.test_accuracy = score->accuracy;
      es.test_loss = score->loss;
    }
    if (last) report_epoch(es, o, steps_per_epoch, &result, progress);
    else result.history.push_back(es);
  }
  if (!kernels::cpu::all_finite(params.data(), n))
    return numeric_error("stage " + std::to_string(stage) + "'s parameters are not finite after training; lower --lr");
  finish_result(&result, step, o.batch_size, train_seconds);
  if (resume && train_seconds > 0)  // the throughput of the steps this run trained
    result.samples_per_second = static_cast<double>(step - resume->step) * o.batch_size / train_seconds;
  result.wall_seconds = seconds_since(job_start);
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
