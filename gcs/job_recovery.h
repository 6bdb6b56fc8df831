// How a job's last failure was handled, for operators (/metrics: detection and resume times):
// table "job_recovery", key the job, JSON. The head's job supervisor writes it when it begins a
// restart (when the failure happened as best it knows — the failed node's last heartbeat when a
// node was lost, else the moment the failure reached it — and when it decided to restart); the
// job's rank 0 adds when training resumed (the first step of the restarted attempt, sync jobs:
// trainers/job/sync_recovery.h). Jobs that never failed have none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/store.h"

namespace troupe::gcs {

constexpr const char* kJobRecoveryTable = "job_recovery";

struct JobRecovery {
  int restarts = 0;            // restarts begun
  int attempt = 0;             // the attempt the last restart began
  std::string cause;           // its one-line cause
  int64_t failed_ms = 0;       // the failure's best-known time (wall clock)
  int64_t detected_ms = 0;     // the supervisor decided to restart
  int64_t resumed_ms = 0;      // the restarted attempt's first step (0: not yet, or not reported)
};

// The supervisor: a restart of `job` begins (attempt `attempt`).
Status note_restart(Store& store, const JobId& job, int attempt, const std::string& cause, int64_t failed_ms,
                    int64_t detected_ms);
// Rank 0: attempt `attempt` trained its first step (ignored unless it is the last restart's).
Status note_resumed_at(Store& store, const JobId& job, int attempt, int64_t resumed_ms);
// A record's bytes (a row of the table): corrupt_data naming the job when they do not decode.
Expected<JobRecovery> decode_job_recovery(const std::string& bytes, const JobId& job);
// nullopt when the job never restarted; corrupt_data naming the job when the record does not decode.
Expected<std::optional<JobRecovery>> job_recovery(Store& store, const JobId& job);

}  // namespace troupe::gcs
