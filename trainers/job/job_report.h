// What a job's rank-0 worker tells the GCS while it trains: progress in the job's record (epoch,
// step, loss, samples/s, ETA, test accuracy; at most every `interval`, and at every epoch's end),
// metrics on the metrics stream (per epoch; per worker: samples/s, data wait, communication), and
// at the end the JSON summary that `troupe submit` prints (the one `troupe train --json` prints,
// plus strategy, workers and per-worker samples/s).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/ids.h"
#include "gcs/store.h"
#include "trainers/setup/train_options.h"

namespace troupe::job {

// The summary of `troupe train --json`.
nlohmann::json train_result_json(const TrainResult& r);

class ProgressReporter {
 public:
  ProgressReporter(gcs::Store& store, JobId job, std::chrono::milliseconds interval = std::chrono::milliseconds(500))
      : store_(store), job_(job), interval_(interval) {}
  // Records `p` when the interval passed or an epoch ended. A GCS error is logged, not returned:
  // progress is information, the training goes on.
  void on_progress(const TrainProgress& p);
  // A resumed job: `steps` were done before this run (its progress counts them).
  void start_at(int64_t steps) { steps_before_epoch_ = steps; }

 private:
  gcs::Store& store_;
  JobId job_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_{};
  int64_t steps_before_epoch_ = 0;  // steps of the epochs already done
  double last_test_accuracy_ = -1;
};

// Appends metric "job/<id>/<name>" (or "job/<id>/worker/<rank>/<name>" when rank >= 0).
void record_job_metric(gcs::Store& store, const JobId& job, int rank, const std::string& name, double value);

// Rank 0 at the end: SUCCEEDED with `summary` and the final accuracy. Refused (invalid_argument)
// when the job already ended (cancelled meanwhile).
Status record_success(gcs::Store& store, const JobId& job, const nlohmann::json& summary, double test_accuracy);

}  // namespace troupe::job
