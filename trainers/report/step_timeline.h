// The step timeline recorder: where each training step of a worker spends its time. The training
// loop (train_replica, trainer_driver.cc; a parameter-server worker's, ps/worker_loop.cc) marks
// phase changes; another thread drains the completed
// steps and reads the phase in progress (the job layer publishes both to the GCS:
// trainers/job/step_timeline_publisher.h). Nothing here touches the GCS or blocks: every call is a
// few clock reads under an uncontended mutex.
//
//   begin(epoch, step) ──> phase(forward_backward) ──> phase(communication) ──> phase(optimizer) ──> end(...)
//   (data_wait starts)      (batch in hand)            (waiting for the all-reduce)               (step complete)
//
// A step that is begun again before end() (a resumed job skipping trained batches) is dropped.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "gcs/step_timeline.h"

namespace troupe {

enum class StepPhase : uint8_t { idle, data_wait, forward_backward, communication, optimizer, done, failed };
// "idle", "data_wait", "forward_backward", "communication", "optimizer", "done", "failed"
const char* step_phase_name(StepPhase p);

class StepRecorder {
 public:
  // Keeps at most `capacity` completed steps between drains (older ones are dropped and counted).
  explicit StepRecorder(size_t capacity = 8192) : capacity_(capacity) {}

  // `comm_bytes_total`: the group's Communicator::payload_bytes() now (0 without one); the growth
  // until end() is the step's communication bytes.
  void begin(int epoch, int64_t step, uint64_t comm_bytes_total = 0);
  void phase(StepPhase p);
  // Completes the step: `samples` trained, its `loss`, and the comm thread's all-reduce seconds so
  // far (cumulative, GradBucketStats::comm_seconds; 0 without buckets): the growth since the last
  // step is this step's overlapped communication.
  void end(int64_t samples, double loss, double comm_seconds_total, uint64_t comm_bytes_total = 0);
  // The step begun last is not one (the feed had no more batches): dropped, the worker idle.
  void abandon() { finish(StepPhase::idle); }
  // The worker is outside any step (an unfinished one is dropped): stopped training, `done` or
  // `failed`, or `idle` (abandon).
  void finish(StepPhase how);

  // The steps completed since the last drain, oldest first; `dropped` (if given) receives how many
  // were lost to the capacity since then.
  std::vector<gcs::StepSample> drain(int64_t* dropped = nullptr);

  struct Now {
    StepPhase phase = StepPhase::idle;
    int64_t since_ms = 0;  // wall clock
    int epoch = 0;
    int64_t step = 0;
  };
  Now now() const;

 private:
  using Clock = std::chrono::steady_clock;
  void close_phase(Clock::time_point t);  // adds the time since phase_start_ to the current phase

  // Wall-clock microseconds of a steady-clock instant: one steady clock for starts and durations,
  // so a step never starts before the previous one ended (the system clock may be slewed).
  int64_t wall_us(Clock::time_point t) const {
    return origin_wall_us_ + std::chrono::duration_cast<std::chrono::microseconds>(t - origin_).count();
  }

  const size_t capacity_;
  const Clock::time_point origin_ = Clock::now();
  const int64_t origin_wall_us_ = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  mutable std::mutex mu_;
  gcs::StepSample current_;
  bool in_step_ = false;
  StepPhase phase_ = StepPhase::idle;
  Clock::time_point phase_start_{};
  int64_t phase_since_ms_ = 0;
  double comm_total_ = 0;
  uint64_t comm_bytes_at_begin_ = 0;
  std::deque<gcs::StepSample> done_;
  int64_t dropped_ = 0;
};

}  // namespace troupe
