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

}  // namespace

Expected<TrainResult> run_worker_loop(StepDevice& device, const std::string& where, const TrainOptions& o,
                                      const Dataset& train, const Dataset& test, BatchFeed& feed, const PsWorker& w,
                                      const ProgressFn& progress, PsWorkerReport* measured,
                                      std::vector<float>* final_params) {
  PsClient& client = *w.client;
  bool finished = false;
  // On every way out the shards learn this worker is done, so no other worker waits for it.
  auto fail = [&](Status st) {
    if (!st.ok() && !finished) (void)client.finish();
    return st;
  };
  const size_t n = device.parameters();
  // --clip-grad-norm, async: each push is an update of its own, clipped by its whole gradient's norm
  // here (every block is on this worker); central: the servers clip the averaged gradient.
  const bool clips = o.clip_grad_norm > 0 && client.mode() == PsMode::async;
  std::vector<float> clipped;
  const int local_batch = o.batch_size / w.workers;
  TrainOptions mine = o;  // progress and epoch reports count this worker's rows per step
  mine.batch_size = local_batch;
  const int64_t steps_per_epoch = train.count / o.batch_size;
  const int64_t total_steps =
      o.max_steps > 0 ? std::min<int64_t>(o.max_steps, steps_per_epoch * o.epochs) : steps_per_epoch * o.epochs;
  int cur = 0;  // the parameter slot of the last whole pull
  bool final_in_cur = false;  // rank 0 evaluated the final parameters: they are in slot `cur`
  TrainResult result;
  result.model = device.model();
  result.device = device.name();
  spdlog::info("worker {}/{} training {} on {}, {} parameter server(s) in {} mode, {} rows per step", w.rank,
               w.workers, result.model, result.device, client.shards(), mode_name(client.mode()), local_batch);

  // Pushes a restored shard lost, recomputed on the device with the last whole pull, the shard's
  // slice of it replaced by what the shard holds before each replay (ps_client.h).
  GatheredRows replay_rows;
  client.set_replay([&](const DataTag& tag, const PsClient::Fresh& fresh, float* out) -> Status {
    if (fresh.values)
      std::copy(fresh.values, fresh.values + fresh.range.size(), device.pull_buffer(cur) + fresh.range.begin);
    TROUPE_RETURN_IF_ERROR(feed.rows_of(tag, &replay_rows));
    TROUPE_RETURN_IF_ERROR(device.replay(cur, replay_rows.batch(train.features()), out));
    if (clips) clip_grad_norm(out, n, o.clip_grad_norm);  // as the push it stands for was
    return Status{};
  });
  struct ClearReplay {  // the function refers to this frame
    PsClient& c;
    ~ClearReplay() { c.set_replay({}); }
  } clear_replay{client};

  PsWorkerReport& m = *measured;
  const auto job_start = Clock::now();
  double train_seconds = 0;
  int64_t clock = std::max(w.start_step, w.start_clock);
  const int first_epoch = std::max(static_cast<int>(w.start_step / steps_per_epoch) + 1, w.first_epoch);
  const int64_t skip_steps = w.start_step % steps_per_epoch;  // of first_epoch, trained before the checkpoint
  bool stop = o.max_steps > 0 && clock >= o.max_steps, counted = true;
  for (int epoch = first_epoch; epoch <= o.epochs && !stop; ++epoch) {
    const auto epoch_start = Clock::now();
    const std::string at_epoch = " at epoch " + std::to_string(epoch);
    TROUPE_RETURN_IF_ERROR(fail(feed.begin_epoch(epoch).with_context(where + ": starting epoch " + std::to_string(epoch))));
    EpochTally tally;
    const int64_t skipped = epoch == first_epoch ? skip_steps : 0;
    // The epoch's progress starts where the job's data stood when this worker took it up (a
    // replacement finishing its predecessor's epoch does not count it again from 0).
    const int64_t steps_before = std::min(steps_per_epoch, feed.examples_done_at_start() / o.batch_size);
    for (int64_t s = 0; s < skipped; ++s) {
      Batch batch;
      auto more = feed.next(&batch);
      if (!more.ok()) return fail(more.status().with_context(where + ": next batch" + at_epoch));
      if (!*more) return fail(internal_error(where + ": the data feed ran out while skipping the " +
                                             std::to_string(skipped) + " steps done before the checkpoint" + at_epoch));
      TROUPE_RETURN_IF_ERROR(fail(feed.trained()));
    }
    while (!stop && (!w.whole_global_batches || skipped + tally.steps < steps_per_epoch)) {
      if (w.steps) w.steps->begin(epoch, clock + 1);  // step timeline: data wait
      Batch batch;
      auto more = feed.next(&batch);
      if (!more.ok()) return fail(more.status().with_context(where + ": next batch" + at_epoch));
      if (!*more) {
        if (w.steps) w.steps->abandon();  // no step after all: idle through evaluation and the wait
        break;
      }
      const std::string at_step = at_epoch + ", step " + std::to_string(tally.steps + 1);
      const DataTag tag = feed.position();
      // The batch goes up while the host waits in the pull.
      TROUPE_RETURN_IF_ERROR(fail(device.upload_batch(batch).with_context(where + ": uploading the batch" + at_step)));
      if (w.steps) w.steps->phase(StepPhase::communication);  // the pull
      auto t0 = Clock::now();
      auto versions = client.pull(clock, device.pull_buffer(1 - cur));
      if (!versions.ok()) return fail(versions.status().with_context("worker " + std::to_string(w.rank) + at_step));
      cur = 1 - cur;
      m.pull_ms += ms_since(t0);
      if (w.steps) w.steps->phase(StepPhase::forward_backward);
      t0 = Clock::now();
      TROUPE_RETURN_IF_ERROR(fail(device.compute(cur).with_context(where + ": queueing the step" + at_step)));
      auto stats = device.wait_gradient();
      if (!stats.ok()) return fail(stats.status().with_context(where + ": forward_backward" + at_step));
      m.compute_ms += ms_since(t0);
      if ((clock + 1) % o.loss_check_every == 0 && !std::isfinite(stats->loss))
        return fail(nonfinite_loss(stats->loss, epoch, tally.steps + 1, steps_per_epoch, clock + 1, o.effective_lr()));
      if (w.steps) w.steps->phase(StepPhase::optimizer);  // the push: the servers apply it
      t0 = Clock::now();
      const float* push = device.push_buffer();
      if (clips) {  // the device's buffer is its own: clipped in a copy
        clipped.assign(push, push + n);
        clip_grad_norm(clipped.data(), n, o.clip_grad_norm);
        push = clipped.data();
      }
      Status pushed = client.push(clock, push, *versions, tag);
      if (!pushed.ok()) return fail(pushed.with_context("worker " + std::to_string(w.rank) + at_step));
      m.push_ms += ms_since(t0);
      TROUPE_RETURN_IF_ERROR(fail(feed.trained()));
      if (w.steps) w.steps->end(batch.size, stats->loss, 0);
      ++clock;
      if (stats->correct < 0) counted = false;
      tally.add(stats->loss, std::max<int64_t>(stats->correct, 0));
      if (progress) {
        TrainProgress p = step_progress(mine, epoch, steps_per_epoch, tally, ms_since(epoch_start) / 1000,
                                        total_steps - clock);
        p.step = std::min(steps_per_epoch, steps_before + p.step);
        progress(p);
      }
      if (o.max_steps > 0 && clock >= o.max_steps) stop = true;
    }
    TROUPE_RETURN_IF_ERROR(fail(feed.end_epoch().with_context(where + ": ending epoch " + std::to_string(epoch))));
    const double epoch_seconds = ms_since(epoch_start) / 1000;
    train_seconds += epoch_seconds;
    EpochStats es = epoch_stats(epoch, tally, local_batch, epoch_seconds);
    if (!counted) es.train_accuracy = -1;
    const bool last = epoch == o.epochs || stop;
    if (w.rank == 0 && w.evaluate && (o.evaluate_each_epoch || last)) {
      // The last epoch is judged on the final parameters: every worker's updates applied.
      if (last) {
        TROUPE_RETURN_IF_ERROR(client.finish().with_context("worker 0 finishing"));
        finished = true;
        if (w.wait_for_all) wait_for_all_workers(client, w.rank);
      }
      float* into = device.pull_buffer(1 - cur);
      auto got = last ? client.pull_final(into) : client.pull(clock, into);
      if (!got.ok()) return fail(got.status().with_context("worker 0 pulling parameters to evaluate" + at_epoch));
      cur = 1 - cur;
      final_in_cur = last;
      TROUPE_RETURN_IF_ERROR(
          fail(score(device, cur, test, &es).with_context(where + ": evaluate after epoch " + std::to_string(epoch))));
    }
    report_epoch(es, mine, steps_per_epoch, &result, progress);
  }
  if (!finished) {
    TROUPE_RETURN_IF_ERROR(client.finish().with_context("worker " + std::to_string(w.rank) + " finishing"));
    finished = true;
  }
  if (w.wait_for_all && !final_params && !(w.rank == 0 && w.evaluate)) wait_for_all_workers(client, w.rank);
  if (final_params) {  // those rank 0 evaluated, or pulled now (once every worker finished)
    if (!final_in_cur) {
      auto got = client.pull_final(device.pull_buffer(1 - cur));
      if (!got.ok()) return got.status().with_context("worker " + std::to_string(w.rank) + ": final parameters");
      cur = 1 - cur;
    }
    const float* from = device.pull_buffer(cur);
    final_params->assign(from, from + n);
  }
  auto staleness = client.staleness();
  if (staleness.ok()) m.staleness = staleness->stats();
  else spdlog::warn("worker {}: no staleness statistics: {}", w.rank, staleness.status().to_string());
  m.steps = clock - std::max(w.start_step, w.start_clock);
  finish_result(&result, clock, local_batch, train_seconds);
  if (m.steps > 0 && clock > m.steps && train_seconds > 0)  // the steps this run trained
    result.samples_per_second = static_cast<double>(m.steps) * local_batch / train_seconds;
  result.wall_seconds = ms_since(job_start) / 1000;
  return result;
}

}  // namespace troupe::ps
