// How the head's search supervisor starts and stops trials: through the job supervisor, as
// `troupe submit` would (actors/search_supervisor.h).
#include "actors/job_submissions.h"
#include "actors/job_supervisor.h"
#include "actors/search_supervisor.h"
#include "gcs/events.h"
#include "gcs/tables.h"

namespace troupe::actors {

TrialHost trial_host(gcs::Store& store, JobSupervisor& jobs, std::function<void()> after_submit) {
  TrialHost h;
  h.start = [&store, &jobs, after_submit](const gcs::SearchRecord& s, const gcs::TrialRecord& t) -> Status {
    auto submission = submission_from_json(t.submission);
    if (!submission.ok()) return submission.status().with_context("trial " + std::to_string(t.index));
    gcs::Table<gcs::JobRecord> table(store);
    auto existing = table.get(t.job.hex());
    if (!existing.ok() && existing.status().code() != Code::not_found) return existing.status();
    if (existing.ok() && existing->state != gcs::JobState::pending) return {};  // already under way
    if (!existing.ok()) {
      gcs::JobRecord job;
      job.id = t.job;
      job.name = s.name + "/trial-" + std::to_string(t.index);
      job.strategy = t.strategy;
      job.workers = t.workers;
      job.ps = t.ps;
      job.epochs = s.epochs;
      job.spec = t.spec;
      job.submitted_ms = gcs::now_ms();
      job.updated_ms = job.submitted_ms;
      job.message = "submitted by search " + s.id.short_hex() + " (" + gcs::describe_settings(t) + ")";
      TROUPE_RETURN_IF_ERROR(table.put(job));
    }
    if (jobs.supervises(t.job)) return {};
    auto reply = jobs.submit(*submission);
    if (!reply.ok()) return reply.status();
    if (after_submit) after_submit();
    return {};
  };
  h.stop = [&jobs](const JobId& job, const std::string& reason) -> Status {
    auto reply = jobs.stop(StopJob{job.hex(), reason});
    return reply.ok() ? Status{} : reply.status();
  };
  h.supervises = [&jobs](const JobId& job) { return jobs.supervises(job); };
  return h;
}

}  // namespace troupe::actors
