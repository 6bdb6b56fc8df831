// JobSupervisor::on_gcs_lost and fill_member_record: the jobs when the GCS came back without its
// data (gcs/gcs_stamp.h). See actors/job_supervisor.h.
#include <spdlog/spdlog.h>

#include "actors/job_submissions.h"
#include "actors/job_supervisor.h"
#include "gcs/events.h"
#include "gcs/job_table.h"
#include "gcs/tables.h"

namespace troupe::actors {

bool JobSupervisor::fill_member_record(const ActorId& id, gcs::ActorRecord* record) const {
  for (const auto& [job_id, job] : jobs_) {
    for (const Member& m : job.members) {
      if (m.id != id) continue;
      record->job = job_id;
      record->resources = {m.actor.cpus, m.actor.gpus, 0};
      record->restarts = job.attempt;
      return true;
    }
  }
  return false;
}

void JobSupervisor::on_gcs_lost(const std::string& what) {
  std::vector<JobId> forget;
  for (auto& [id, job] : jobs_) {
    Status st = save_submission(*host_.store, job.submission);
    gcs::JobRecord rec;
    if (job.record) {
      rec = *job.record;
    } else {
      rec.id = id;
      rec.submitted_ms = gcs::now_ms();
    }
    const bool waiting = job.members.empty() && job.attempt == 0 && !job.ending;
    if (waiting) {  // never started: nothing of it was lost but its record
      rec.state = gcs::JobState::pending;
      if (st.ok()) st = gcs::Table<gcs::JobRecord>(*host_.store).put(rec);
      if (!st.ok()) spdlog::warn("job {}: writing it back after the GCS lost its data: {}", id.short_hex(), st.to_string());
      continue;
    }
    const std::string why = "the GCS lost its data while the job ran (" + what + "): its shard ledger, progress, "
                            "trained ranges and checkpoint records are gone, so it cannot go on exactly once; "
                            "submit it again (its checkpoint files stay where it wrote them)";
    if (!gcs::job_finished(rec.state)) (void)gcs::finish_job(gcs::JobState::failed, why)(rec);
    rec.updated_ms = gcs::now_ms();
    if (st.ok()) st = gcs::Table<gcs::JobRecord>(*host_.store).put(rec);
    if (!st.ok()) spdlog::error("job {}: recording it FAILED after the GCS lost its data: {}", id.short_hex(), st.to_string());
    spdlog::error("job {} FAILED: {}", id.short_hex(), why);
    job_event(*host_.store, "job_failed", id, "job " + id.short_hex() + " FAILED: " + why);
    job.ending = true;
    job.restarting = false;
    stop_members(job, "job " + id.short_hex() + " FAILED: " + why, false);
    if (!any_running(job)) forget.push_back(id);
  }
  for (const JobId& id : forget) jobs_.erase(id);
}

}  // namespace troupe::actors
