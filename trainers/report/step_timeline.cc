#include "trainers/report/step_timeline.h"

namespace troupe {
const char* step_phase_name(StepPhase p) {
  switch (p) {
    case StepPhase::idle: return "idle";
    case StepPhase::data_wait: return "data_wait";
    case StepPhase::forward_backward: return "forward_backward";
    case StepPhase::communication: return "communication";
    case StepPhase::optimizer: return "optimizer";
    case StepPhase::done: return "done";
    case StepPhase::failed: return "failed";
  }
  return "unknown";
}

void StepRecorder::close_phase(Clock::time_point t) {
  if (!in_step_) return;
  const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(t - phase_start_).count();
  switch (phase_) {
    case StepPhase::data_wait: current_.data_us += us; break;
    case StepPhase::forward_backward: current_.compute_us += us; break;
    case StepPhase::communication: current_.comm_us += us; break;
    case StepPhase::optimizer: current_.optimizer_us += us; break;
    default: break;
  }
}

void StepRecorder::begin(int epoch, int64_t step, uint64_t comm_bytes_total) {
  const auto t = Clock::now();
  const int64_t us = wall_us(t);
  std::lock_guard<std::mutex> lock(mu_);
  current_ = gcs::StepSample{};
  current_.epoch = epoch;
  current_.step = step;
  current_.start_us = us;
  comm_bytes_at_begin_ = comm_bytes_total;
  in_step_ = true;
  phase_ = StepPhase::data_wait;
  phase_start_ = t;
  phase_since_ms_ = us / 1000;
}

void StepRecorder::phase(StepPhase p) {
  const auto t = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  close_phase(t);
  phase_ = p;
  phase_start_ = t;
  phase_since_ms_ = wall_us(t) / 1000;
}

void StepRecorder::end(int64_t samples, double loss, double comm_seconds_total, uint64_t comm_bytes_total) {
  const auto t = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (!in_step_) return;
  close_phase(t);
  current_.samples = samples;
  current_.loss = loss;
  current_.comm_busy_us = static_cast<int64_t>((comm_seconds_total - comm_total_) * 1e6);
  comm_total_ = comm_seconds_total;
  current_.comm_bytes = comm_bytes_total >= comm_bytes_at_begin_ ? static_cast<int64_t>(comm_bytes_total - comm_bytes_at_begin_) : 0;
  done_.push_back(current_);
  if (done_.size() > capacity_) {
    done_.pop_front();
    ++dropped_;
  }
  in_step_ = false;
  phase_ = StepPhase::idle;
  phase_start_ = t;
  phase_since_ms_ = wall_us(t) / 1000;
}

void StepRecorder::finish(StepPhase how) {
  const auto t = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  in_step_ = false;
  phase_ = how;
  phase_since_ms_ = wall_us(t) / 1000;
}

std::vector<gcs::StepSample> StepRecorder::drain(int64_t* dropped) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<gcs::StepSample> out(done_.begin(), done_.end());
  done_.clear();
  if (dropped) *dropped = dropped_;
  dropped_ = 0;
  return out;
}

StepRecorder::Now StepRecorder::now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Now{phase_, phase_since_ms_, current_.epoch, current_.step};
}

}  // namespace troupe
