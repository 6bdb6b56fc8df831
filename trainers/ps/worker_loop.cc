#include "trainers/ps/worker_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <spdlog/spdlog.h>

#include "trainers/report/epoch_report.h"
#include "trainers/optim/grad_clip.h"
#include "trainers/ps/worker_common.h"
#include "trainers/report/step_timeline.h"

namespace troupe::ps {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The parameters in `slot` scored over the whole split into es: test accuracy (-1 when the model
// does not count) and mean test loss (-1 when the device does not compute it).
Status score(StepDevice& device, int slot, const Dataset& test, EpochStats* es) {
  auto t = device.evaluate(slot, test);
  if (!t.ok()) return t.status();
  es->test_accuracy = t->correct < 0 ? -1.0 : test.count ? static_cast<double>(t->correct) / test.count : 0.0;
  es->test_loss = t->rows > 0 ? t->loss_sum / static_cast<double>(t->rows) : -1.0;
  return {};
}

// One worker's run: the epochs, each of steps that pull, compute and push (step), rank 0's
// evaluation (evaluate), then the end (finish). On every way out of a step or an epoch the shards
// learn this worker is done (fail), so no other worker waits for it.
class WorkerLoop {
 public:
  WorkerLoop(StepDevice& device, const std::string& where, const TrainOptions& o, const Dataset& train,
             const Dataset& test, BatchFeed& feed, const PsWorker& w, const ProgressFn& progress,
             PsWorkerReport& measured)
      : device_(device), where_(where), o_(o), train_(train), test_(test), feed_(feed), w_(w), progress_(progress),
        m_(measured), client_(*w.client), n_(device.parameters()),
        // --clip-grad-norm, async: each push is an update of its own, clipped by its whole gradient's
        // norm here (every block is on this worker); central: the servers clip the averaged gradient.
        clips_(o.clip_grad_norm > 0 && client_.mode() == PsMode::async), local_batch_(o.batch_size / w.workers),
        mine_(o), steps_per_epoch_(train.count / o.batch_size) {
    mine_.batch_size = local_batch_;  // progress and epoch reports count this worker's rows per step
    total_steps_ = o.max_steps > 0 ? std::min<int64_t>(o.max_steps, steps_per_epoch_ * o.epochs)
                                   : steps_per_epoch_ * o.epochs;
  }

  Expected<TrainResult> run(std::vector<float>* final_params);

 private:
  Status fail(Status st) {
    if (!st.ok() && !finished_) (void)client_.finish();
    return st;
  }
  // Pushes a restored shard lost, recomputed on the device with the last whole pull, the shard's
  // slice of it replaced by what the shard holds before each replay (ps_client.h).
  void set_replay();
  Status run_epoch(int epoch);
  // The steps of `epoch` trained before the checkpoint this run resumed from, drawn and marked.
  Status skip_trained(int64_t skipped, const std::string& at_epoch);
  // One step; false: the feed ran out.
  Expected<bool> step(int epoch, const std::string& at_epoch, EpochTally& tally, Clock::time_point epoch_start,
                      int64_t steps_before);
  // The gradient of the last pull pushed (clipped first, async); `at_step` names the step.
  Status push(const Versions& versions, const DataTag& tag, const std::string& at_step);
  // Rank 0: the parameters pulled (after the last epoch, the final ones) and scored into es.
  Status evaluate(int epoch, bool last, const std::string& at_epoch, EpochStats* es);
  Expected<TrainResult> finish(std::vector<float>* final_params);

  StepDevice& device_;
  const std::string& where_;
  const TrainOptions& o_;
  const Dataset& train_;
  const Dataset& test_;
  BatchFeed& feed_;
  const PsWorker& w_;
  const ProgressFn& progress_;
  PsWorkerReport& m_;
  PsClient& client_;
  const size_t n_;
  const bool clips_;
  std::vector<float> clipped_;
  const int local_batch_;
  TrainOptions mine_;
  const int64_t steps_per_epoch_;
  int64_t total_steps_ = 0;
  bool finished_ = false;
  int cur_ = 0;               // the parameter slot of the last whole pull
  bool final_in_cur_ = false;  // rank 0 evaluated the final parameters: they are in slot `cur_`
  TrainResult result_;
  GatheredRows replay_rows_;
  Clock::time_point job_start_;
  double train_seconds_ = 0;
  int64_t clock_ = 0;
  int first_epoch_ = 1;
  int64_t skip_steps_ = 0;  // of first_epoch_, trained before the checkpoint
  bool stop_ = false, counted_ = true;
};

void WorkerLoop::set_replay() {
  client_.set_replay([this](const DataTag& tag, const PsClient::Fresh& fresh, float* out) -> Status {
    if (fresh.values)
      std::copy(fresh.values, fresh.values + fresh.range.size(), device_.pull_buffer(cur_) + fresh.range.begin);
    TROUPE_RETURN_IF_ERROR(feed_.rows_of(tag, &replay_rows_));
    TROUPE_RETURN_IF_ERROR(device_.replay(cur_, replay_rows_.batch(train_.features()), out));
    if (clips_) clip_grad_norm(out, n_, o_.clip_grad_norm, device_.state_ranges());  // as the push it stands for was
    return Status{};
  });
}

Expected<TrainResult> WorkerLoop::run(std::vector<float>* final_params) {
  result_.model = device_.model();
  result_.device = device_.name();
  spdlog::info("worker {}/{} training {} on {}, {} parameter server(s) in {} mode, {} rows per step", w_.rank,
               w_.workers, result_.model, result_.device, client_.shards(), mode_name(client_.mode()), local_batch_);
  set_replay();
  struct ClearReplay {  // the function refers to this object
    PsClient& c;
    ~ClearReplay() { c.set_replay({}); }
  } clear_replay{client_};

  job_start_ = Clock::now();
  clock_ = std::max(w_.start_step, w_.start_clock);
  first_epoch_ = std::max(static_cast<int>(w_.start_step / steps_per_epoch_) + 1, w_.first_epoch);
  skip_steps_ = w_.start_step % steps_per_epoch_;
  stop_ = o_.max_steps > 0 && clock_ >= o_.max_steps;
  for (int epoch = first_epoch_; epoch <= o_.epochs && !stop_; ++epoch) TROUPE_RETURN_IF_ERROR(run_epoch(epoch));
  return finish(final_params);
}

Status WorkerLoop::run_epoch(int epoch) {
  const auto epoch_start = Clock::now();
  const std::string at_epoch = " at epoch " + std::to_string(epoch);
  TROUPE_RETURN_IF_ERROR(fail(feed_.begin_epoch(epoch).with_context(where_ + ": starting epoch " + std::to_string(epoch))));
  EpochTally tally;
  const int64_t skipped = epoch == first_epoch_ ? skip_steps_ : 0;
  // The epoch's progress starts where the job's data stood when this worker took it up (a
  // replacement finishing its predecessor's epoch does not count it again from 0).
  const int64_t steps_before = std::min(steps_per_epoch_, feed_.examples_done_at_start() / o_.batch_size);
  TROUPE_RETURN_IF_ERROR(skip_trained(skipped, at_epoch));
  while (!stop_ && (!w_.whole_global_batches || skipped + tally.steps < steps_per_epoch_)) {
    auto more = step(epoch, at_epoch, tally, epoch_start, steps_before);
    if (!more.ok()) return more.status();
    if (!*more) break;
  }
  TROUPE_RETURN_IF_ERROR(fail(feed_.end_epoch().with_context(where_ + ": ending epoch " + std::to_string(epoch))));
  const double epoch_seconds = ms_since(epoch_start) / 1000;
  train_seconds_ += epoch_seconds;
  EpochStats es = epoch_stats(epoch, tally, local_batch_, epoch_seconds);
  if (!counted_) es.train_accuracy = -1;
  const bool last = epoch == o_.epochs || stop_;
  if (w_.rank == 0 && w_.evaluate && (o_.evaluate_each_epoch || last))
    TROUPE_RETURN_IF_ERROR(evaluate(epoch, last, at_epoch, &es));
  report_epoch(es, mine_, steps_per_epoch_, &result_, progress_);
  return {};
}

Status WorkerLoop::skip_trained(int64_t skipped, const std::string& at_epoch) {
  for (int64_t s = 0; s < skipped; ++s) {
    Batch batch;
    auto more = feed_.next(&batch);
    if (!more.ok()) return fail(more.status().with_context(where_ + ": next batch" + at_epoch));
    if (!*more) return fail(internal_error(where_ + ": the data feed ran out while skipping the " +
                                           std::to_string(skipped) + " steps done before the checkpoint" + at_epoch));
    TROUPE_RETURN_IF_ERROR(fail(feed_.trained()));
  }
  return {};
}

Expected<bool> WorkerLoop::step(int epoch, const std::string& at_epoch, EpochTally& tally,
                                Clock::time_point epoch_start, int64_t steps_before) {
  if (w_.steps) w_.steps->begin(epoch, clock_ + 1);  // step timeline: data wait
  Batch batch;
  auto more = feed_.next(&batch);
  if (!more.ok()) return fail(more.status().with_context(where_ + ": next batch" + at_epoch));
  if (!*more) {
    if (w_.steps) w_.steps->abandon();  // no step after all: idle through evaluation and the wait
    return false;
  }
  const std::string at_step = at_epoch + ", step " + std::to_string(tally.steps + 1);
  const DataTag tag = feed_.position();
  // The batch goes up while the host waits in the pull.
  TROUPE_RETURN_IF_ERROR(fail(device_.upload_batch(batch).with_context(where_ + ": uploading the batch" + at_step)));
  if (w_.steps) w_.steps->phase(StepPhase::communication);  // the pull
  auto t0 = Clock::now();
  auto versions = client_.pull(clock_, device_.pull_buffer(1 - cur_));
  if (!versions.ok()) return fail(versions.status().with_context("worker " + std::to_string(w_.rank) + at_step));
  cur_ = 1 - cur_;
  m_.pull_ms += ms_since(t0);
  if (w_.steps) w_.steps->phase(StepPhase::forward_backward);
  t0 = Clock::now();
  TROUPE_RETURN_IF_ERROR(fail(device_.compute(cur_).with_context(where_ + ": queueing the step" + at_step)));
  auto stats = device_.wait_gradient();
  if (!stats.ok()) return fail(stats.status().with_context(where_ + ": forward_backward" + at_step));
  m_.compute_ms += ms_since(t0);
  if ((clock_ + 1) % o_.loss_check_every == 0 && !std::isfinite(stats->loss))
    return fail(nonfinite_loss(stats->loss, epoch, tally.steps + 1, steps_per_epoch_, clock_ + 1, o_.effective_lr()));
  if (w_.steps) w_.steps->phase(StepPhase::optimizer);  // the push: the servers apply it
  TROUPE_RETURN_IF_ERROR(push(*versions, tag, at_step));
  TROUPE_RETURN_IF_ERROR(fail(feed_.trained()));
  if (w_.steps) w_.steps->end(batch.size, stats->loss, 0);
  ++clock_;
  if (stats->correct < 0) counted_ = false;
  tally.add(stats->loss, std::max<int64_t>(stats->correct, 0));
  if (progress_) {
    TrainProgress p = step_progress(mine_, epoch, steps_per_epoch_, tally, ms_since(epoch_start) / 1000,
                                    total_steps_ - clock_);
    p.step = std::min(steps_per_epoch_, steps_before + p.step);
    progress_(p);
  }
  if (o_.max_steps > 0 && clock_ >= o_.max_steps) stop_ = true;
  return true;
}

Status WorkerLoop::push(const Versions& versions, const DataTag& tag, const std::string& at_step) {
  const auto t0 = Clock::now();
  const float* push = device_.push_buffer();
  if (clips_) {  // the device's buffer is its own: clipped in a copy
    clipped_.assign(push, push + n_);
    clip_grad_norm(clipped_.data(), n_, o_.clip_grad_norm, device_.state_ranges());
    push = clipped_.data();
  }
  Status pushed = client_.push(clock_, push, versions, tag);
  if (!pushed.ok()) return fail(pushed.with_context("worker " + std::to_string(w_.rank) + at_step));
  m_.push_ms += ms_since(t0);
  return {};
}

// The last epoch is judged on the final parameters: every worker's updates applied.
Status WorkerLoop::evaluate(int epoch, bool last, const std::string& at_epoch, EpochStats* es) {
  if (last) {
    TROUPE_RETURN_IF_ERROR(client_.finish().with_context("worker 0 finishing"));
    finished_ = true;
    if (w_.wait_for_all) wait_for_all_workers(client_, w_.rank);
  }
  float* into = device_.pull_buffer(1 - cur_);
  auto got = last ? client_.pull_final(into) : client_.pull(clock_, into);
  if (!got.ok()) return fail(got.status().with_context("worker 0 pulling parameters to evaluate" + at_epoch));
  cur_ = 1 - cur_;
  final_in_cur_ = last;
  return fail(score(device_, cur_, test_, es).with_context(where_ + ": evaluate after epoch " + std::to_string(epoch)));
}

// The end: the shards told, the final parameters pulled where wanted, the report and result.
Expected<TrainResult> WorkerLoop::finish(std::vector<float>* final_params) {
  if (!finished_) {
    TROUPE_RETURN_IF_ERROR(client_.finish().with_context("worker " + std::to_string(w_.rank) + " finishing"));
    finished_ = true;
  }
  if (w_.wait_for_all && !final_params && !(w_.rank == 0 && w_.evaluate)) wait_for_all_workers(client_, w_.rank);
  if (final_params) {  // those rank 0 evaluated, or pulled now (once every worker finished)
    if (!final_in_cur_) {
      auto got = client_.pull_final(device_.pull_buffer(1 - cur_));
      if (!got.ok()) return got.status().with_context("worker " + std::to_string(w_.rank) + ": final parameters");
      cur_ = 1 - cur_;
    }
    const float* from = device_.pull_buffer(cur_);
    final_params->assign(from, from + n_);
  }
  auto staleness = client_.staleness();
  if (staleness.ok()) m_.staleness = staleness->stats();
  else spdlog::warn("worker {}: no staleness statistics: {}", w_.rank, staleness.status().to_string());
  m_.steps = clock_ - std::max(w_.start_step, w_.start_clock);
  finish_result(&result_, clock_, local_batch_, train_seconds_);
  if (m_.steps > 0 && clock_ > m_.steps && train_seconds_ > 0)  // the steps this run trained
    result_.samples_per_second = static_cast<double>(m_.steps) * local_batch_ / train_seconds_;
  result_.wall_seconds = ms_since(job_start_) / 1000;
  return std::move(result_);
}

}  // namespace

Expected<TrainResult> run_worker_loop(StepDevice& device, const std::string& where, const TrainOptions& o,
                                      const Dataset& train, const Dataset& test, BatchFeed& feed, const PsWorker& w,
                                      const ProgressFn& progress, PsWorkerReport* measured,
                                      std::vector<float>* final_params) {
  WorkerLoop loop(device, where, o, train, test, feed, w, progress, *measured);
  return loop.run(final_params);
}

}  // namespace troupe::ps
