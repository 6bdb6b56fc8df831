// The flags of `troupe submit`, shared with `troupe tune` (each trial is a job such a submit would
// make): registration, the job spec they describe, and the messages a job is submitted with.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "actors/head_messages.h"
#include "cli/train_flags.h"
#include "core/ids.h"
#include "core/status.h"
#include "gcs/records.h"
#include "gcs/store.h"
#include "trainers/job/job_spec.h"

namespace troupe::cli {

struct SubmitFlags {
  TrainFlags train;
  job::JobSpec spec;
  bool detach = false;
  double pending_timeout = 60;
  double stall_timeout = 300;
  double progress_timeout_s = 120;  // the spec's progress_timeout_ms, in seconds
  std::string resume;         // a job id (or a unique prefix of one) to resume
  CLI::Option* workers_flag = nullptr;
};

// Adds every job flag of `troupe submit` (training flags, strategy, placement, checkpoints,
// restarts, --name) to `cmd`, except --resume, --detach and the following timeouts.
void add_job_flags(CLI::App* cmd, SubmitFlags& f);

// The spec after parsing, before the library and --resume: the flags' spec with the training
// options finished (invalid_argument naming a bad flag).
Expected<job::JobSpec> flags_spec(SubmitFlags& f);

// Makes `spec` ready to submit: its checkpoint directory absolute, a pipeline's workers defaulted
// to its stages (when --workers was not given), then validated, its model file (torchscript:FILE)
// stored in the GCS (trainers/job/job_model_file.h) and checked against the cluster's capacity
// (invalid_argument naming what cannot be).
Status finish_submit_spec(gcs::Store& store, job::JobSpec& spec, bool workers_given);

// The head's message for job `id` (its actors, restart policy), and its first JobRecord (PENDING).
actors::SubmitJob submit_message(const JobId& id, const job::JobSpec& spec);
gcs::JobRecord new_job_record(const JobId& id, const job::JobSpec& spec);

}  // namespace troupe::cli
