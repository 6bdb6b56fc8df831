// `troupe predict --workers N`: the prediction as a job of N predictor actors on the running
// cluster (trainers/job/predict_worker.h), submitted like `troupe submit` submits a training job
// and followed the same way (a progress bar of rows, the summary; --json, --detach).
#pragma once

#include "cli/commands.h"
#include "trainers/job/predict_spec.h"

namespace troupe::cli {

struct PredictJobFlags {
  job::PredictJobSpec spec;   // spec.predict holds the one-process flags
  bool detach = false;
  bool json = false;
  bool no_progress = false;
  double pending_timeout = 60;
  double stall_timeout = 300;
};

// Checks what can be checked here (the model file, the --out directory, the cluster's room),
// records the job and hands it to the head; returns the exit code.
int run_predict_job(PredictJobFlags flags, GlobalOptions& global);

}  // namespace troupe::cli
