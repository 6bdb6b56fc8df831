// A job's model file (--model torchscript:FILE) through the GCS: the submitter stores its bytes
// (ship_model_file), every worker — and `troupe export JOB` — reads the file from its path when that
// holds the same bytes, else from the GCS's copy fetched into a local cache (use_model_file), so a
// multi-host job needs the file on the submitting machine only (trainers/library/trainer_file_store.h).
#pragma once

#include <string>

#include "core/status.h"
#include "gcs/store.h"
#include "trainers/job/job_spec.h"

namespace troupe::job {

// Stores the file spec.train's model file arg names and records its checksum in spec.model_file_sum;
// a spec that already has a checksum the GCS holds keeps it (a resumed job trains the module it
// began with). Nothing for a model without a file. Errors name the file: not there, over the limit
// (put_trainer_file), the store's.
Status ship_model_file(gcs::Store& store, JobSpec& spec);

// Gives the trainer the GCS's copy of the model file (runtime arg "<key>_local", e.g. file_local)
// when its path on this machine does not hold the bytes the job was submitted with (`store` null:
// no GCS to fetch from). Nothing for a spec without a model_file_sum. Errors: local_trainer_file's,
// naming the job's file.
Status use_model_file(gcs::Store* store, JobSpec& spec, const std::string& cache_dir);

}  // namespace troupe::job
