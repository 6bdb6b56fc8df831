// Where `troupe export` finds a job's checkpoints and what they were trained with:
//
//   from the GCS        a running cluster's job: its record's settings, its manifests (table
//                       "checkpoints", trainers/checkpoint/checkpoint_catalog.h), newest first
//   from a directory    no cluster at all: <checkpoint dir>/<job> (every step-* directory's
//                       MANIFEST.trpm, gcs/checkpoint_mirror.h) or one step directory of it
//
// Both read the job's JOB.json (trainers/job/job_file.h) beside the checkpoints for the shape of
// its examples, which the trainer's setup() needs. A directory may have been moved or copied: the
// shard files are taken from the step directory where the manifest is found, by their file names.
// Every strategy's checkpoint looks the same here: shards tiling the flat parameter buffer (sync:
// one slice per replica; central and async: one range per parameter server; pipeline: one per stage).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/store.h"
#include "trainers/api/trainer.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/job/job_spec.h"

namespace troupe::exporting {

struct CheckpointEntry {
  int64_t step = 0;
  checkpoint::Manifest manifest;  // the shard files where they are now
  std::string problem;            // not empty: why it cannot be used (a damaged or missing manifest)
};

struct CheckpointSource {
  JobId job;
  std::string where;                      // "job 1a2b3c4d" or the directory given, for messages
  std::string job_dir;                    // <checkpoint dir>/<job>
  job::JobSpec spec;                      // the job's settings as submitted
  DataSpec data;                          // the shape of its examples
  std::string normalization;              // --normalize's statistics (JOB.json), or ""
  std::string library_file;               // its trainer library's file name ("" built in)
  std::vector<CheckpointEntry> checkpoints;  // newest step first
  int64_t only_step = -1;                 // a step directory was given: its step
};

// Job `job` of the cluster whose GCS is `store`. Errors: the job's record (not_found), a job that
// wrote no checkpoints (invalid_argument: submitted without --checkpoint-every), its JOB.json
// (not_found / corrupt_data naming the file), the GCS's.
Expected<CheckpointSource> source_from_gcs(gcs::Store& store, const JobId& job);

// `dir`: a job's checkpoint directory (<checkpoint dir>/<job>) or one of its step directories.
// Errors name `dir` and say what to give instead: not_found (no such directory), invalid_argument
// (a directory that is no checkpoint directory; the --checkpoint-dir of several jobs, listing them),
// and JOB.json's errors. Damaged manifests are not errors here: their entries carry the problem.
Expected<CheckpointSource> source_from_directory(const std::string& dir);

}  // namespace troupe::exporting
