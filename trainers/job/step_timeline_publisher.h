// Publishes a worker's step timeline (trainers/report/step_timeline.h) to the GCS
// (gcs/step_timeline.h) from a thread of its own, every `interval`: the steps completed since the
// last flush as one stream entry, the phase in progress in the timeline_live table, and (rank 0) a
// point of the job's loss curve. The
// training loop never waits for the GCS; a GCS error is logged once and the next flush tries again.
//
//   StepRecorder recorder;
//   StepTimelinePublisher timeline(store, job, rank, recorder);
//   replica.steps = &recorder;  ... train ...
//   timeline.stop(ok);          // marks the worker done or failed, flushes the rest, joins
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/ids.h"
#include "gcs/store.h"
#include "trainers/report/step_timeline.h"

namespace troupe::job {

class StepTimelinePublisher {
 public:
  StepTimelinePublisher(gcs::Store& store, JobId job, int rank, StepRecorder& recorder,
                        std::chrono::milliseconds interval = std::chrono::milliseconds(500));
  ~StepTimelinePublisher();  // stop(false) unless stopped
  StepTimelinePublisher(const StepTimelinePublisher&) = delete;
  StepTimelinePublisher& operator=(const StepTimelinePublisher&) = delete;

  // Marks the worker done (ok) or failed, flushes once more and joins the thread. Idempotent.
  void stop(bool ok);

 private:
  void run();
  void flush();

  gcs::Store& store_;
  const std::string job_hex_;
  const int rank_;
  StepRecorder& recorder_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool warned_ = false;
  std::thread thread_;  // last: started once everything above is built
};

}  // namespace troupe::job
