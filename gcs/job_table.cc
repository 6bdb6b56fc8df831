#include "gcs/job_table.h"

#include "gcs/events.h"
#include "gcs/tables.h"

namespace troupe::gcs {

bool job_finished(JobState s) {
  return s == JobState::succeeded || s == JobState::failed || s == JobState::cancelled;
}

Expected<JobRecord> update_job(Store& store, const JobId& id, const std::function<Status(JobRecord&)>& edit,
                               std::chrono::milliseconds timeout) {
  return update_record<JobRecord>(store, id.hex(), "job", edit, timeout);
}

std::function<Status(JobRecord&)> finish_job(JobState state, const std::string& message) {
  return [state, message](JobRecord& j) -> Status {
    if (job_finished(j.state)) {
      return Status(Code::invalid_argument,
                    "job " + j.id.short_hex() + " already ended (" + job_state_name(j.state) + ")");
    }
    j.state = state;
    j.message = message;
    j.finished_ms = now_ms();
    if (state == JobState::succeeded) j.progress = 1;
    return {};
  };
}

}  // namespace troupe::gcs
