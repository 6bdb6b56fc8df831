// Exactly-once accounting of a prediction job (`troupe predict --workers N`), provable from the GCS
// alone, like a training job's (gcs/data_accounting.h).
//
// The job's rows are cut into S contiguous shards of one ledger epoch (shard s = rows
// [s * shard_rows, ...), in input order). A predictor that finished a shard wrote its outputs to a
// part file (temp + fsync + rename) and then, before completing the shard in the ledger, recorded a
// PredictedPart: which rows, by whom, in which attempt, and the xxh64 of the outputs it wrote. A
// predictor killed mid-shard leaves neither (its temporary file is never renamed); the shard goes
// back to the ledger and is predicted again whole by its next owner, whose part replaces nothing.
// The assembler (predictor 0) copies each shard's part into the output only when its bytes hash to
// the recorded checksum.
//
// The proof (account_predict_job): every shard DONE; the parts tile [0, rows) — none missing, none
// overlapping, each of its shard's size; every part assembled with its recorded checksum.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/records.h"
#include "gcs/store.h"

namespace troupe::gcs {

// Predictor `index`'s ledger identity (ShardRecord::owner): the same for every attempt of the slot,
// so a replacement gives back what its dead predecessor held.
WorkerId predictor_identity(const JobId& job, int index);

// Table "predicted_parts", key "<job>/<shard>". Written once per shard by its finishing owner
// (a re-predicted shard's new owner overwrites the record of a part that was never completed).
struct PredictedPart {
  JobId job;
  int shard = 0;
  int64_t first_row = 0;
  int64_t rows = 0;
  int64_t width = 0;          // outputs per row
  WorkerId owner;
  int attempt = 0;            // the predictor's attempt (0, or its slot's restart)
  std::string checksum;       // xxh64 of the part's f32 outputs (rows x width, little-endian), hex
  int64_t right = 0;          // classifier rows whose largest output was the label (scored rows only)
  int64_t scored = 0;         // rows scored against the data's target
  double squared = 0;         // regression: sum of squared errors; a language model (--seq-len):
                              // sum over its windows of their mean next-token loss
  int64_t started_ms = 0;     // claimed
  int64_t finished_ms = 0;    // part written
  bool assembled = false;     // copied into the output by the assembler, checksum verified
};
std::string encode(const PredictedPart& r);
Status decode(const std::string& bytes, PredictedPart* out);
std::string record_key(const PredictedPart& r);
template <> struct TableName<PredictedPart> { static constexpr const char* value = "predicted_parts"; };

// The job's parts ordered by shard.
Expected<std::vector<PredictedPart>> predicted_parts(Store& store, const JobId& job);

struct PredictAccounting {
  bool exactly_once = false;
  int64_t rows = 0;
  int shards = 0;
  int attempts = 0;                // distinct predictor attempts that wrote parts
  int64_t reclaimed_shards = 0;    // shard claims beyond the first (predicted again after a kill)
  std::vector<std::string> problems;
  std::string summary() const;     // one line for the event
};

// Checks shards 0..shards-1 of ledger epoch 1 and the parts against `rows` rows. Errors only when
// the GCS cannot be read; a failed proof is a report with the problems named.
Expected<PredictAccounting> account_predict_job(Store& store, const JobId& job, int shards, int64_t rows);

}  // namespace troupe::gcs
