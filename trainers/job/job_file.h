// What a job's checkpoints were trained with, kept beside them: <checkpoint dir>/<job>/JOB.json.
// A checkpoint holds a flat buffer of floats; turning it back into a model (`troupe export`,
// trainers/export/) needs the trainer's parameter layout, which only the trainer's setup() gives,
// and setup() needs the job's settings and the shape of its examples. The GCS has the settings
// while the cluster runs; this file is what a checkpoint directory copied elsewhere, or kept after
// the cluster is gone, still has.
//
//   {"format": 1, "job": "<32 hex>", "troupe_version": "0.1.0",
//    "data": {"features": 784, "classes": 10, "target_width": 1,   (the job's DataSpec)
//             "fields": [{"name": "image", "type": "f32", "stored": "u8", "shape": [28, 28], "target": false}, ...]},
//    "library": "libuser_trainer.so",            ("" for a built-in trainer)
//    "spec": ["strategy=sync", "workers=2", ...]}   (the job's settings as submitted: job_spec.h)
//
// Every actor of a job that checkpoints writes it when it sets up (trainers/job/job_setup.h) if it
// is not there yet: durably (temp + fsync + rename), so it is whole or absent, and before any
// checkpoint of the job can exist. Every actor writes the same bytes (the settings as submitted,
// not as a node completed them).
#pragma once

#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "trainers/api/trainer.h"

namespace troupe::job {

constexpr int kJobFileFormat = 1;
constexpr const char* kJobFileName = "JOB.json";

struct JobFile {
  JobId job;
  std::string troupe_version;
  DataSpec data;
  std::string library;             // the trainer library's file name; "" for a built-in trainer
  std::vector<std::string> spec;   // the job's settings (JobRecord::spec)
  std::string normalization;       // the statistics --normalize computed (Dataset::normalization), or ""
};

// <job_dir>/JOB.json
std::string job_file_path(const std::string& job_dir);

std::string encode_job_file(const JobFile& f);

// Writes `f` into `job_dir` (created if needed) unless a JOB.json is there already. io_error naming
// the file (the job cannot checkpoint there either).
Status ensure_job_file(const std::string& job_dir, const JobFile& f);

// Reads <job_dir>/JOB.json: not_found naming it when it is absent (checkpoints written before troupe
// exported them), corrupt_data naming it and the defect otherwise (not JSON, a missing or
// mistyped field, another format).
Expected<JobFile> read_job_file(const std::string& job_dir);

}  // namespace troupe::job
