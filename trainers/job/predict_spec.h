// What a prediction job (`troupe predict --workers N` on a running cluster) asks for, and how it
// travels: "key=value" settings in the job's GCS record (JobRecord::spec, strategy "predict"), read
// back by every predictor. Its own small table, apart from a training job's (job_spec.h): the two
// share no setting but the supervision ones.
//
// Paths (model, data, out, parts_dir) are absolute, made so by the submitter, and read on each
// predictor's node: on one host that is the submitter's file system; across hosts they must be the
// same paths on every node (a shared file system), as checkpoint directories must.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "trainers/predict/predict.h"

namespace troupe::job {

constexpr const char* kPredictStrategy = "predict";

struct PredictJobSpec {
  std::string name;
  PredictOptions predict;       // model, data, split, inputs, target, token dtype, out, batch size
  int workers = 1;              // predictor actors
  double cpus_per_worker = 1;
  // Rows per ledger shard, a multiple of the batch size (so every batch starts where one process's
  // would, and the outputs are the same bit for bit); 0: chosen from the rows (shard_rows_for).
  int64_t shard_rows = 0;
  // Where the shards' part files go (one per shard, part-<shard>.npy); removed once assembled.
  std::string parts_dir;
  // Supervision (actors/job_supervisor.h): a failed predictor is replaced, up to max_restarts times.
  int max_restarts = 3;
  int64_t restart_backoff_ms = 200;
  std::string restart_on = "any";
  // How long predictor 0 waits for the other predictors' shards without any shard finishing,
  // before it fails naming the shards still held and by whom.
  int64_t wait_timeout_ms = 600000;
};

// invalid_argument naming the field: workers outside [1, 4096], a batch size < 1, shard_rows not a
// multiple of it, relative or empty paths, an unknown restart_on.
Status validate(const PredictJobSpec& spec);

// The rows per shard for `rows` rows: spec.shard_rows, or about 8 shards per predictor (at least
// one batch each), rounded up to whole batches.
int64_t shard_rows_for(const PredictJobSpec& spec, int64_t rows);
int shard_count(int64_t rows, int64_t shard_rows);

std::vector<std::string> to_settings(const PredictJobSpec& spec);
// corrupt_data naming the item that does not parse or is unknown.
Expected<PredictJobSpec> predict_spec_from_settings(const std::vector<std::string>& settings);

}  // namespace troupe::job
