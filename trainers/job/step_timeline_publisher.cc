#include "trainers/job/step_timeline_publisher.h"

#include <spdlog/spdlog.h>

#include "gcs/events.h"
#include "gcs/step_timeline.h"

namespace troupe::job {

StepTimelinePublisher::StepTimelinePublisher(gcs::Store& store, JobId job, int rank, StepRecorder& recorder,
                                             std::chrono::milliseconds interval)
    : store_(store), job_hex_(job.hex()), rank_(rank), recorder_(recorder), interval_(interval),
      thread_([this] { run(); }) {}

StepTimelinePublisher::~StepTimelinePublisher() { stop(false); }

void StepTimelinePublisher::stop(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  const StepPhase now = recorder_.now().phase;
  if (now != StepPhase::done && now != StepPhase::failed) recorder_.finish(ok ? StepPhase::done : StepPhase::failed);
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  flush();
}

void StepTimelinePublisher::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, interval_, [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    flush();
    lock.lock();
  }
}

void StepTimelinePublisher::flush() {
  int64_t dropped = 0;
  const std::vector<gcs::StepSample> steps = recorder_.drain(&dropped);
  Status st;
  if (!steps.empty()) st = gcs::append_steps(store_, job_hex_, rank_, steps);
  // Rank 0 keeps the curve: a sync job's loss is the same on every rank; a parameter-server job's
  // is rank 0's own batches'.
  if (st.ok() && rank_ == 0 && !steps.empty()) {
    double sum = 0;
    for (const gcs::StepSample& s : steps) sum += s.loss;
    st = gcs::append_loss_point(store_, job_hex_, {steps.back().step, sum / static_cast<double>(steps.size()), gcs::now_ms()});
  }
  const StepRecorder::Now now = recorder_.now();
  gcs::WorkerLive live;
  live.rank = rank_;
  live.phase = step_phase_name(now.phase);
  live.phase_since_ms = now.since_ms;
  live.epoch = now.epoch;
  live.step = now.step;
  live.updated_ms = gcs::now_ms();
  if (st.ok()) st = gcs::put_live(store_, job_hex_, live);
  if (dropped > 0) spdlog::warn("job {} worker {}: {} steps of the timeline were dropped (the GCS was slow)",
                                job_hex_.substr(0, 8), rank_, dropped);
  if (!st.ok() && !warned_) {
    warned_ = true;
    spdlog::warn("job {} worker {}: publishing the step timeline: {} (retrying every flush)", job_hex_.substr(0, 8),
                 rank_, st.to_string());
  }
}

}  // namespace troupe::job
