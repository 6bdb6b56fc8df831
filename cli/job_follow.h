// Following a submitted job from the command line: a progress bar from the job's record in the GCS
// (epoch, step, loss, samples/s, ETA), a line per finished epoch, and the summary at the end.
#pragma once

#include <chrono>
#include <string>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/store.h"

namespace troupe::cli {

struct FollowOptions {
  bool progress = true;
  int64_t progress_interval_ms = 200;
  // Give up (exit 1, the job keeps its state) when a PENDING job has not started in this long, or a
  // running one recorded nothing in this long.
  std::chrono::milliseconds pending_timeout{60000};
  std::chrono::milliseconds stall_timeout{300000};
  // A GCS that does not answer (restarted by the head, frozen) is waited out this long (the
  // setting outage_grace_ms), with a line saying so, before following gives up.
  std::chrono::milliseconds outage_grace{60000};
  bool json = false;
  std::string command = "submit";  // whose errors they are ("troupe submit: error: ...")
};

// Returns the exit code: 0 when the job SUCCEEDED (summary printed), 1 when it FAILED, was
// CANCELLED, or following gave up (each with the reason on stderr).
int follow_job(gcs::Store& store, const JobId& job, const FollowOptions& options);

// The job whose id starts with `prefix` (at least 4 hex digits): not_found, or invalid_argument
// when several match.
Expected<JobId> find_job(gcs::Store& store, const std::string& prefix);

}  // namespace troupe::cli
