// A job's step timeline as JSON, shared by `troupe timeline` and the dashboard
// (/api/jobs/<id>/timeline): every worker's newest steps (gcs/step_timeline.h), per-worker
// means, the straggler (the worker whose own work — data wait, forward+backward, optimizer — is
// slowest by a clear margin: the others wait for it in the all-reduce), and, while the job runs,
// a stuck collective (ranks waiting in the all-reduce for seconds) with the rank they wait for.
// Parameter-server jobs (async, central) record a step's pull as communication and its push as
// optimizer: their straggler's own work counts the push, "stuck" means workers waiting in a pull
// (the staleness bound, or a server), and the answer's phases say so.
// The Chrome trace event format (one track per worker, opens in Perfetto and chrome://tracing)
// is rendered from the same steps.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "gcs/job_recovery.h"
#include "gcs/records.h"
#include "gcs/step_timeline.h"
#include "gcs/store.h"

namespace troupe::gcs {

struct TimelineOptions {
  size_t steps = 500;              // newest steps per worker (at most kTimelineMaxSteps)
  // A worker is the straggler when its mean own work over the window exceeds the median of the
  // others' by this factor and by at least min_straggler_ms.
  double straggler_factor = 1.25;
  double min_straggler_ms = 1.0;
  int64_t stuck_after_ms = 5000;   // ranks in the all-reduce this long are stuck
  int64_t stale_after_ms = 3000;   // a rank silent this long is not running (dead or stopped)
  int64_t now_ms = 0;              // 0: the wall clock
};

struct WorkerTimeline {
  int rank = 0;
  std::vector<StepSample> steps;
  std::optional<WorkerLive> live;
};

// Reads every worker's timeline of `job` (ranks 0 .. job.workers - 1; sync, async and central
// workers record one).
Expected<std::vector<WorkerTimeline>> read_job_timeline(Store& store, const JobRecord& job, size_t steps);

// {"job", "state", "strategy", "workers": [{"rank", "live", "steps": [...], "summary": {...}}], "straggler",
//  "stuck", "phases": [{"key", "name"}, ...] (in the order a step runs them), "loss_curve": [[step, loss], ...], "now_ms"} — docs/dashboard.md describes every field.
nlohmann::json timeline_json(const JobRecord& job, const std::vector<WorkerTimeline>& workers,
                             const TimelineOptions& options, const std::vector<LossPoint>& loss_curve = {});

// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}: per worker (tid = rank) a
// "step N" slice with its phases nested inside; with the job's last restart (gcs/job_recovery.h) a
// "job" track (tid -1) draws it: "recovery (live|checkpoint)" from the failure to the first step
// trained again, "detecting" from the failure to the supervisor's decision inside it.
nlohmann::json chrome_trace(const JobRecord& job, const std::vector<WorkerTimeline>& workers,
                            const std::optional<JobRecovery>& recovery = std::nullopt);

}  // namespace troupe::gcs
