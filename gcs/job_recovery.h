// How a job's last failure was handled, for operators (/metrics: detection and resume times):
// table "job_recovery", key the job, JSON. The head's job supervisor writes it when it begins a
// restart (when the failure happened as best it knows — the failed node's last heartbeat when a
// node was lost, else the moment the failure reached it — and when it decided to restart); the
// job's rank 0 adds when training resumed (the first step of the restarted attempt, sync jobs:
// trainers/job/sync_recovery.h). Jobs that never failed have none.
#pragma once

#include <algorithm>
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
  // How the job went on (sync jobs): "checkpoint" (every worker from the newest checkpoint, or the
  // beginning) or "live" (survivors kept their state in memory and a replacement took it from one of
  // them: trainers/job/live_recovery.h); "" until its rank 0 said.
  std::string mode;
  int64_t failed_step = -1;    // the job's step count when the failure reached the supervisor (-1: unknown)
  int64_t from_step = -1;      // the step the restarted attempt went on from (-1: not yet)
  int source_rank = -1;        // live: the rank whose memory the state came from
  int64_t bytes_moved = 0;     // live: the bytes of state it sent
  // A worker's note_failed_step that came before the supervisor's note_restart (the worker saw its
  // peer gone first): the next restart's failed_step takes it into account.
  int64_t pending_failed_step = -1;
  // Steps the job had done that were trained again: failed_step - from_step (0 when none, -1 unknown).
  int64_t steps_lost() const { return failed_step < 0 || from_step < 0 ? -1 : std::max<int64_t>(0, failed_step - from_step); }
};

// The supervisor: a restart of `job` begins (attempt `attempt`).
Status note_restart(Store& store, const JobId& job, int attempt, const std::string& cause, int64_t failed_ms,
                    int64_t detected_ms, int64_t failed_step = -1);
// Rank 0: attempt `attempt` trained its first step, going on from step `from_step` (-1: not said)
// (ignored unless it is the last restart's, or already noted).
Status note_resumed_at(Store& store, const JobId& job, int attempt, int64_t resumed_ms, int64_t from_step = -1);
// A worker of the attempt that failed, as it ends: it had completed `steps` steps. The restart's
// failed_step is the most any of them says, and at least what the supervisor read from the job's
// record (which lags); said before the supervisor began the restart, it waits for it.
Status note_failed_step(Store& store, const JobId& job, int64_t steps);
// Rank 0 of a sync job's attempt, before its first step: how it went on — "live" from rank
// `source_rank`'s memory (`bytes` sent), or "checkpoint" (source -1) — from step `from_step`.
// Ignored unless `attempt` is the last restart's.
Status note_recovery_mode(Store& store, const JobId& job, int attempt, const std::string& mode, int64_t from_step,
                          int source_rank, int64_t bytes);
// A record's bytes (a row of the table): corrupt_data naming the job when they do not decode.
Expected<JobRecovery> decode_job_recovery(const std::string& bytes, const JobId& job);
// nullopt when the job never restarted; corrupt_data naming the job when the record does not decode.
Expected<std::optional<JobRecovery>> job_recovery(Store& store, const JobId& job);

}  // namespace troupe::gcs
