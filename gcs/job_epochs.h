// A job's results epoch by epoch, kept in the GCS for as long as the job's record (table
// "job_epochs", key: the job id, value: a JSON array). The job's rank-0 worker writes an epoch's
// line when the epoch ends (trainers/job/job_report.h); a search reads them to stop trials early
// (actors/search_supervisor.h). Unlike the bounded metrics stream, nothing here is trimmed away by
// other jobs' samples. A restarted job that trains an epoch again replaces that epoch's line.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/store.h"

namespace troupe::gcs {

constexpr const char* kJobEpochsTable = "job_epochs";

struct EpochResult {
  int epoch = 0;              // 1-based
  double train_loss = 0;
  double train_accuracy = -1; // -1: not measured (regression, language models)
  double test_accuracy = -1;  // on the evaluation data (--val, the data's val or test split)
  double test_loss = -1;
  double seconds = 0;
  int64_t time_ms = 0;        // when it was recorded
};

// One epoch as a JSON object, and back (throws nlohmann's exceptions on a bad object).
nlohmann::json epoch_result_json(const EpochResult& e);
EpochResult epoch_result_from_json(const nlohmann::json& j);

// Adds (or replaces) `e` in job `job`'s history. One writer per job (its rank 0).
Status record_job_epoch(Store& store, const JobId& job, const EpochResult& e);
// The job's epochs in order; empty when none ended yet. corrupt_data naming the job when the
// history does not decode.
Expected<std::vector<EpochResult>> job_epochs(Store& store, const JobId& job);

// The value of metric `name` in `e`: test_accuracy, test_loss (val_accuracy and val_loss are the
// same: the evaluation data), train_loss or train_accuracy; false when `e` lacks it (-1). A diverged
// trial's NaN is returned as is: rankings treat it as the worst value (rank_value).
bool epoch_metric(const EpochResult& e, const std::string& name, double* value);
// `v` for ranking in `mode` ("max" or "min"): a value that is not finite ranks last.
double rank_value(double v, const std::string& mode);
// Whether `name` is a metric an epoch can report (the list above).
bool known_epoch_metric(const std::string& name);

}  // namespace troupe::gcs
