// Read-modify-write of job records (gcs/records.h JobRecord): the submitter, the head's job
// supervisor and the job's rank-0 worker all change the same record, so every change after the
// first write is a compare-and-set of the whole record, retried from a fresh read when someone
// else wrote in between. An edit may refuse (return an error): a job that already ended is not
// moved again.
#pragma once

#include <chrono>
#include <functional>

#include "core/status.h"
#include "gcs/records.h"
#include "gcs/store.h"

namespace troupe::gcs {

bool job_finished(JobState s);  // SUCCEEDED, FAILED or CANCELLED

// Reads job `id`, lets `edit` change it and writes it back atomically (updated_ms = now), until
// the write wins or `timeout` passes. Returns the record as written. not_found when there is no
// such job; the edit's error as is; timeout when other writers kept winning. Publishes the key on
// the "jobs" channel, like Table::put.
Expected<JobRecord> update_job(Store& store, const JobId& id, const std::function<Status(JobRecord&)>& edit,
                               std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

// The edit that moves a job to a final state with `message`, unless it already ended
// (invalid_argument naming the state it is in).
std::function<Status(JobRecord&)> finish_job(JobState state, const std::string& message);

}  // namespace troupe::gcs
