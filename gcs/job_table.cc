#include "gcs/job_table.h"

#include <thread>

#include "gcs/events.h"
#include "gcs/tables.h"

namespace troupe::gcs {

bool job_finished(JobState s) {
  return s == JobState::succeeded || s == JobState::failed || s == JobState::cancelled;
}

Expected<JobRecord> update_job(Store& store, const JobId& id, const std::function<Status(JobRecord&)>& edit,
                               std::chrono::milliseconds timeout) {
  const char* table = TableName<JobRecord>::value;
  const std::string key = id.hex();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int attempt = 0;; ++attempt) {
    auto bytes = store.get(table, key);
    if (!bytes.ok()) return bytes.status();
    if (!bytes->has_value()) return not_found("no job " + key);
    JobRecord job;
    Status st = decode(**bytes, &job);
    if (!st.ok()) return st.with_context("jobs/" + key);
    TROUPE_RETURN_IF_ERROR(edit(job));
    job.updated_ms = now_ms();
    auto swapped = store.compare_and_set(table, key, **bytes, encode(job));
    if (!swapped.ok()) return swapped.status();
    if (*swapped) {
      Status pub = store.publish(table, key);
      (void)pub;  // watchers also poll; a lost notification only delays them
      return job;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(Code::timeout, "updating job " + id.short_hex() + ": other writers kept changing it for " +
                                       std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (1 + attempt % 8)));
  }
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
